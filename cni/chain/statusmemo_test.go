package chain_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/test/cniplugins"
)

// TestStatusMemoAnswersFromAPassUntilSomethingChanges runs the real test
// plugin's STATUS through a memo, step by step, and counts the plugin's
// runs: a pass answers again within the reuse while the plugin file, its
// input and the plugin directory stay as they were; anything else, a
// failure included, runs the plugin again.
func TestStatusMemoAnswersFromAPassUntilSomethingChanges(t *testing.T) {
	bin := cniplugins.Dir(t)
	records := filepath.Join(t.TempDir(), "records")
	conf := func(extra string) string {
		return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":%q,"recordFile":%q%s}]}`, cniplugins.Recorder, records, extra)
	}
	now := time.Unix(1_800_000_000, 0)
	memo := chain.NewStatusMemo(30*time.Second, func() time.Time { return now })
	ch := chain.New(nil, []string{bin}, nil)
	plugin := filepath.Join(bin, cniplugins.Recorder)
	steps := []struct {
		name   string
		change func(t *testing.T)
		conf   string
		ran    bool
		fails  bool
	}{
		{"first ask", nil, conf(""), true, false},
		{"asked again at once", nil, conf(""), false, false},
		{"29 s after the pass", func(*testing.T) { now = now.Add(29 * time.Second) }, conf(""), false, false},
		{"30 s after the pass", func(*testing.T) { now = now.Add(time.Second) }, conf(""), true, false},
		{"another input", nil, conf(`,"failOn":["STATUS"]`), true, true},
		{"a failure is not kept", nil, conf(`,"failOn":["STATUS"]`), true, true},
		{"the passing input again, within its reuse", nil, conf(""), false, false},
		{"the plugin replaced", func(t *testing.T) { replace(t, plugin) }, conf(""), true, false},
		{"a plugin installed beside it", func(t *testing.T) { copyFile(t, plugin, filepath.Join(bin, "host-local-new")) }, conf(""), true, false},
		{"the plugin written in place", func(t *testing.T) { appendByte(t, plugin) }, conf(""), true, false},
		{"unchanged", nil, conf(""), false, false},
	}
	ctx := context.Background()
	for _, s := range steps {
		if s.change != nil {
			s.change(t)
		}
		before := len(cniplugins.ReadRecords(t, records))
		err := memo.Status(ctx, ch, parse(t, s.conf))
		ran := len(cniplugins.ReadRecords(t, records)) > before
		if ran != s.ran || (err != nil) != s.fails {
			t.Errorf("%s: plugin ran %v, err %v; want ran %v, failing %v", s.name, ran, err, s.ran, s.fails)
		}
	}
	if err := os.Remove(plugin); err != nil {
		t.Fatal(err)
	}
	if err := memo.Status(ctx, ch, parse(t, conf(""))); err == nil {
		t.Error("STATUS with the plugin uninstalled passed: want the missing plugin's error")
	}
}

// TestStatusMemoWithoutReuseRunsEveryAsk: reuse 0 is Chain.Status.
func TestStatusMemoWithoutReuseRunsEveryAsk(t *testing.T) {
	bin := cniplugins.Dir(t)
	records := filepath.Join(t.TempDir(), "records")
	list := parse(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":%q,"recordFile":%q}]}`, cniplugins.Recorder, records))
	memo := chain.NewStatusMemo(0, nil)
	ch := chain.New(nil, []string{bin}, nil)
	for range 3 {
		if err := memo.Status(context.Background(), ch, list); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(cniplugins.ReadRecords(t, records)); got != 3 {
		t.Errorf("plugin ran %d times for 3 asks, want 3", got)
	}
}

// replace puts a copy of path in its place, as a package upgrade does.
func replace(t *testing.T, path string) {
	t.Helper()
	copyFile(t, path, path+".new")
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// appendByte writes the file in place: a Go binary runs with a byte
// appended.
func appendByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
}
