package nodefacts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ListingScript run by /bin/sh on a directory of this machine: the files
// with their sizes, and config.json's content for the memory estimate.
func TestListingScript(t *testing.T) {
	dir := t.TempDir()
	config := "{\n  \"num_hidden_layers\": 2\n}\n"
	for name, body := range map[string]string{"config.json": config, "model.safetensors": "0123456789", "sub/tok.json": "x"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("/bin/sh", "-c", ListingScript, "sh", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseListing(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if l.Dir != dir || len(l.Files) != 3 || l.Files["model.safetensors"] != 10 || l.Files["config.json"] != int64(len(config)) || l.Files["sub/tok.json"] != 1 {
		t.Fatalf("%+v", l)
	}
	if string(l.Config) != config {
		t.Errorf("config = %q", l.Config)
	}
	// No config.json: no config; a missing directory: missing.
	_ = os.Remove(filepath.Join(dir, "config.json"))
	out, _ = exec.Command("/bin/sh", "-c", ListingScript, "sh", dir).Output()
	if l, err := ParseListing(string(out)); err != nil || l.Config != nil || len(l.Files) != 2 {
		t.Fatalf("%+v %v", l, err)
	}
	out, _ = exec.Command("/bin/sh", "-c", ListingScript, "sh", filepath.Join(dir, "nope")).Output()
	if l, err := ParseListing(string(out)); err != nil || !l.Missing {
		t.Fatalf("%+v %v", l, err)
	}
}
