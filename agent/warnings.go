package agent

import "log/slog"

// standingWarnings logs each warning of a kind when it appears, not again
// while it stands, and again when it comes back after a report of its kind
// without it; a warning that goes away is logged as cleared. It keeps only
// the warnings standing now, so texts that change do not pile up.
type standingWarnings struct {
	byKind map[string]map[string]bool
}

// report replaces kind's standing warnings with current, logging to log
// those that were not standing and those that no longer are.
func (w *standingWarnings) report(log *slog.Logger, kind string, current []string) {
	old := w.byKind[kind]
	if len(old) == 0 && len(current) == 0 {
		return
	}
	now := make(map[string]bool, len(current))
	for _, c := range current {
		if !old[c] && !now[c] {
			log.Warn(kind, "warning", c)
		}
		now[c] = true
	}
	for c := range old {
		if !now[c] {
			log.Info(kind+": cleared", "warning", c)
		}
	}
	if w.byKind == nil {
		w.byKind = map[string]map[string]bool{}
	}
	w.byKind[kind] = now
}
