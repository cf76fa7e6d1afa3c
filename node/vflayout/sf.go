package vflayout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sfDirs matches the directory of each SF mlx5 activated on a PF: an
// auxiliary device below the PF's, with the sfnum it was added with.
const sfDirs = "mlx5_core.sf.*"

// SFs are the sfnums of the PF's SFs, ascending, when want counts them;
// nil when it does not: a layout without numSfs never reads them.
func (s Sysfs) SFs(pf string, want Want) ([]int, error) {
	if want.NumSFs == nil {
		return nil, nil
	}
	return s.readSFs(pf)
}

func (s Sysfs) readSFs(pf string) ([]int, error) {
	files, err := filepath.Glob(filepath.Join(s.device(pf), sfDirs, "sfnum"))
	if err != nil {
		return nil, err
	}
	nums := make([]int, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			// Deleted since the glob listed it: kernfs removes an SF's
			// directory while readers list, so it is gone, not unknown.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("PF %s: read the SFs: %w", pf, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("PF %s: %s: %q is no sfnum", pf, f, b)
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}

// sfTarget is the sfnums a PF that has the SFs have should have for a
// count of n: the highest go first, and new ones take the numbers above
// the highest (from 0 on a PF with none), so that a count raised and
// lowered again, or lowered and raised, leaves the PF the SFs it had.
func sfTarget(have []int, n int) []int {
	if n <= len(have) {
		return slices.Clone(have[:n])
	}
	next := 0
	if len(have) > 0 {
		next = have[len(have)-1] + 1
	}
	out := slices.Clone(have)
	for len(out) < n {
		out = append(out, next)
		next++
	}
	return out
}

// removeSFs deletes each SF of the PF that target does not name, the
// highest first, and waits until sysfs shows it gone.
func (s Sysfs) removeSFs(ctx context.Context, pf string, target []int) error {
	have, err := s.readSFs(pf)
	if err != nil {
		return err
	}
	for _, num := range slices.Backward(have) {
		if slices.Contains(target, num) {
			continue
		}
		if err := s.changeSF(ctx, pf, num, false); err != nil {
			return err
		}
	}
	return nil
}

// addSFs adds each SF target names that the PF does not have, the lowest
// first, and waits until sysfs shows it.
func (s Sysfs) addSFs(ctx context.Context, pf string, target []int) error {
	have, err := s.readSFs(pf)
	if err != nil {
		return err
	}
	for _, num := range target {
		if slices.Contains(have, num) {
			continue
		}
		if err := s.changeSF(ctx, pf, num, true); err != nil {
			return err
		}
	}
	return nil
}

// changeSF adds (add) or deletes the PF's SF sfnum through devlink, then
// waits for its auxiliary device to come or go: mlx5 makes it from a
// firmware event after devlink answers.
func (s Sysfs) changeSF(ctx context.Context, pf string, num int, add bool) error {
	if s.ESwitch == nil {
		return errNoDevlinkSFs
	}
	change, what := s.ESwitch.DeleteSF, fmt.Sprintf("SF %d gone", num)
	if add {
		change, what = s.ESwitch.AddSF, fmt.Sprintf("SF %d", num)
	}
	if err := change(ctx, pf, num); err != nil {
		return fmt.Errorf("SF %d: %w", num, err)
	}
	return s.bind().Wait(ctx, what, func() (bool, error) {
		have, err := s.readSFs(pf)
		return slices.Contains(have, num) == add, err
	})
}

// sfsDiffer says how the PF's SFs differ from the sfnums before, "" when
// they do not.
func (s Sysfs) sfsDiffer(pf string, before []int) (string, error) {
	have, err := s.readSFs(pf)
	if err != nil || slices.Equal(have, before) {
		return "", err
	}
	return fmt.Sprintf("the PF has SFs %v, it had %v", have, before), nil
}
