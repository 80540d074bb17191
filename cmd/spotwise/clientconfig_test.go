package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The CLI takes --token, then SPOTWISE_TOKEN, then the config file the
// server writes, and sends the file's token to the file's server only.
func TestClientResolvesServerAndToken(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if _, err := writeClientConfig(clientConfig{Server: "http://127.0.0.1:9999", Token: "spw_file"}); err != nil {
		t.Fatal(err)
	}
	path, _ := clientConfigPath()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(filepath.Dir(path)) != "spotwise" {
		t.Fatalf("%s: %v %v", path, err, fi.Mode())
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name                string
		server, token       string
		env                 map[string]string
		wantServer, wantTok string
	}{
		{"nothing set: the file", "", "", nil, "http://127.0.0.1:9999", "spw_file"},
		{"the flag wins", "", "spw_flag", map[string]string{"SPOTWISE_TOKEN": "spw_env"}, "http://127.0.0.1:9999", "spw_flag"},
		{"then the environment", "", "", map[string]string{"SPOTWISE_TOKEN": "spw_env"}, "http://127.0.0.1:9999", "spw_env"},
		{"the file's server named another way", "127.0.0.1:9999", "", nil, "127.0.0.1:9999", "spw_file"},
		{"another server does not get the file's token", "10.0.0.1:8080", "", nil, "10.0.0.1:8080", ""},
		{"nor one named in the environment", "", "", map[string]string{"SPOTWISE_SERVER": "10.0.0.1:8080"}, "10.0.0.1:8080", ""},
	}
	for _, tt := range tests {
		s, tok, err := resolveClient(tt.server, tt.token, env(tt.env))
		if err != nil || s != tt.wantServer || tok != tt.wantTok {
			t.Errorf("%s: %q %q %v, want %q %q", tt.name, s, tok, err, tt.wantServer, tt.wantTok)
		}
	}
}
