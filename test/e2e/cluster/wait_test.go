package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPollReportsWhatWasMissing: a wait whose last check the deadline cut
// short (an API server's slow List ending in "context deadline exceeded")
// reports what the check before it found missing, which says why the
// wait failed (TestSwitchdevRepresentor, 2026-12-06, said only "unexpected
// error when reading response body").
func TestPollReportsWhatWasMissing(t *testing.T) {
	for _, tt := range []struct {
		name   string
		checks []func(context.Context) error
		want   []string
	}{
		{"cut short after a finding", []func(context.Context) error{missing, blockedUntilDone},
			[]string{"3 of 4 ready", "the last check, cut short: context deadline exceeded"}},
		{"cut short at once", []func(context.Context) error{blockedUntilDone},
			[]string{"gave up after", "context deadline exceeded"}},
		{"every check finds it missing", []func(context.Context) error{missing},
			[]string{"gave up after", "3 of 4 ready"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Poll(context.Background(), 200*time.Millisecond, "the pods", func(ctx context.Context) error {
				check := tt.checks[min(calls, len(tt.checks)-1)]
				calls++
				return check(ctx)
			})
			if err == nil {
				t.Fatal("Poll succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Poll: %v; want it to say %q", err, w)
				}
			}
		})
	}
}

func missing(context.Context) error { return errors.New("3 of 4 ready") }

func blockedUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}
