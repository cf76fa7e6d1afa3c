package netconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func namedConf(name, typ string) string {
	return `{"cniVersion":"1.0.0","name":"` + name + `","type":"` + typ + `"}`
}

func namedList(name, typ string) string {
	return `{"cniVersion":"1.0.0","name":"` + name + `","plugins":[{"type":"` + typ + `"}]}`
}

func TestSpec3_4_1_ResolutionOrder(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		specConfig string
		skip       string // file name the skip func leaves out
		wantType   string
		wantSource string // file name, or "" for spec.config
		wantErr    []string
	}{
		{
			name:       "3.4.1 step 1 spec.config wins over a same-named file",
			files:      map[string]string{"net.conflist": namedList("net", "from-file")},
			specConfig: namedConf("net", "from-nad"),
			wantType:   "from-nad",
		},
		{
			name:       "3.4.2 spec.config without a name gets the object's",
			specConfig: `{"cniVersion":"0.3.0","type":"awesome-plugin"}`,
			wantType:   "awesome-plugin",
		},
		{
			name:       "3.4.1 step 1 invalid spec.config is an error, not a fall-through",
			files:      map[string]string{"net.conflist": namedList("net", "from-file")},
			specConfig: `{"cniVersion":"0.3.0"`,
			wantErr:    []string{"NetworkAttachmentDefinition ns/net spec.config: config is not valid JSON"},
		},
		{
			name: "3.4.1 step 2 configlist wins over conf",
			files: map[string]string{
				"a.conf":     namedConf("net", "conf"),
				"z.conflist": namedList("net", "list"),
			},
			wantType: "list", wantSource: "z.conflist",
		},
		{
			name: "3.4.1 step 2 first configlist in file name order",
			files: map[string]string{
				"20-net.conflist": namedList("net", "second"),
				"10-net.conflist": namedList("net", "first"),
				"05-x.conflist":   namedList("other", "other"),
			},
			wantType: "first", wantSource: "10-net.conflist",
		},
		{
			name:     "3.4.1 step 2 the JSON name matches, not the file name",
			files:    map[string]string{"net.conflist": namedList("other", "wrong"), "99.conflist": namedList("net", "right")},
			wantType: "right", wantSource: "99.conflist",
		},
		{
			name:     "3.4.1 step 3 conf used when no configlist has the name",
			files:    map[string]string{"net.conflist": namedList("other", "list"), "net.conf": namedConf("net", "conf")},
			wantType: "conf", wantSource: "net.conf",
		},
		{
			name:     "3.4.1 step 3 .json counts as a conf, sorted with .conf",
			files:    map[string]string{"b.conf": namedConf("net", "conf"), "a.json": namedConf("net", "json")},
			wantType: "json", wantSource: "a.json",
		},
		{
			name:    "3.4.1 other extensions are not configurations",
			files:   map[string]string{"net.yaml": namedConf("net", "yaml"), "net.conf.bak": namedConf("net", "bak")},
			wantErr: []string{`no CNI configuration named "net"`},
		},
		{
			name:     "skip leaves out hwnet's own file",
			files:    map[string]string{"00-hwnet.conflist": namedList("net", "hwnet"), "net.conf": namedConf("net", "conf")},
			skip:     "00-hwnet.conflist",
			wantType: "conf", wantSource: "net.conf",
		},
		{
			name:    "3.4.1 step 4 fail naming the object and the directory",
			files:   map[string]string{"other.conflist": namedList("other", "x")},
			wantErr: []string{"NetworkAttachmentDefinition ns/net has no spec.config and", `no CNI configuration named "net" in `},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			skip := func(path string) bool { return tt.skip != "" && path == filepath.Join(dir, tt.skip) }
			d, err := Resolve("ns", "net", tt.specConfig, dir, skip)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Resolve found %s in %s, want an error", d.Plugins[0].Type, d.Source)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantSource := "NetworkAttachmentDefinition ns/net spec.config"
			if tt.wantSource != "" {
				wantSource = filepath.Join(dir, tt.wantSource)
			}
			if d.Name != "net" || d.Plugins[0].Type != tt.wantType || d.Source != wantSource {
				t.Errorf("got %q type %q from %q, want net type %q from %q", d.Name, d.Plugins[0].Type, d.Source, tt.wantType, wantSource)
			}
		})
	}
}

func TestSpec3_4_1_Step4NamesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := Resolve("ns", "net", "", dir, nil)
	var notFound *NotFoundError
	if !errors.As(err, &notFound) || notFound.Dir != dir || notFound.Name != "net" {
		t.Fatalf("Resolve = %v, want a *NotFoundError for net in %s", err, dir)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "ns/net") {
		t.Errorf("error %q does not name the object and %s", err, dir)
	}
}

func TestFindOnDiskSkipsInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	bad := map[string]string{
		"10-broken.conflist":    `{"name":"net",`,
		"20-noplugins.conflist": `{"name":"net","plugins":[]}`,
		"30-version.conf":       `{"name":"net","cniVersion":"9.9.9","type":"x"}`,
		"40-noname.json":        `{"type":"x"}`,
	}
	writeFiles(t, dir, bad)
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "50-dangling.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "60-directory.conf"), 0o700); err != nil {
		t.Fatal(err)
	}

	_, err := FindOnDisk(dir, "net", nil)
	var notFound *NotFoundError
	if !errors.As(err, &notFound) {
		t.Fatalf("FindOnDisk = %v, want a *NotFoundError", err)
	}
	if len(notFound.Skipped) != len(bad)+1 {
		t.Errorf("skipped %d files, want %d: %v", len(notFound.Skipped), len(bad)+1, notFound.Skipped)
	}
	for _, name := range []string{"10-broken.conflist", "20-noplugins.conflist", "30-version.conf", "40-noname.json", "50-dangling.conf"} {
		if !strings.Contains(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "60-directory.conf") {
		t.Errorf("a directory was reported as a skipped file: %v", err)
	}

	writeFiles(t, dir, map[string]string{"70-net.conf": namedConf("net", "good")})
	d, err := FindOnDisk(dir, "net", nil)
	if err != nil {
		t.Fatalf("a valid file after invalid ones: %v", err)
	}
	if d.Plugins[0].Type != "good" {
		t.Errorf("found type %q, want good", d.Plugins[0].Type)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"00-default.conflist": namedList("cluster", "calico"),
		"noname.conf":         `{"cniVersion":"1.0.0","type":"x"}`,
	})
	tests := []struct {
		file, wantType, wantErr string
	}{
		{"00-default.conflist", "calico", ""},
		{"noname.conf", "", "noname.conf: name: missing"},
		{"absent.conf", "", "absent.conf: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			d, err := LoadFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadFile = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Source != path || d.Plugins[0].Type != tt.wantType {
				t.Errorf("got type %q source %q, want %q %q", d.Plugins[0].Type, d.Source, tt.wantType, path)
			}
		})
	}
}
