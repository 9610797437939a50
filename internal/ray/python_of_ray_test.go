package ray

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sedPythonOfRay is PythonOfRay as it was, with head and sed: the shell's
// own reading must find the same interpreter for every first line.
const sedPythonOfRay = `rp=$(command -v -- "$ray" 2>/dev/null) &&
  py=$(head -n 1 -- "$rp" 2>/dev/null | sed -n 's/^#![[:space:]]*\([^[:space:]]*\).*/\1/p')
case "$py" in */env|"") py=python3 ;; esac`

func TestPythonOfRayReadsTheShebang(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, first, want string
	}{
		{"venv", "#!/opt/ray/bin/python3\nimport sys\n", "/opt/ray/bin/python3"},
		{"spaces and a flag", "#!  /opt/ray/bin/python3.11 -u\n", "/opt/ray/bin/python3.11"},
		{"env", "#!/usr/bin/env python3\n", "python3"},
		{"no newline", "#!/opt/ray/bin/python3", "/opt/ray/bin/python3"},
		{"crlf", "#!/opt/ray/bin/python3\r\n", "/opt/ray/bin/python3"},
		{"tab", "#!\t/opt/ray/bin/python3\n", "/opt/ray/bin/python3"},
		{"binary", "\x7fELF\x02\x01\x01\n#!/not/this\n", "python3"},
		{"empty", "", "python3"},
		{"not a shebang", "# #!/opt/ray/bin/python3\n", "python3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ray := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(ray, []byte(c.first), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, impl := range []struct{ name, script string }{{"PythonOfRay", PythonOfRay}, {"head and sed", sedPythonOfRay}} {
				out, err := exec.Command("/bin/sh", "-c", "ray=$1; py=\n"+impl.script+"\nprintf %s \"$py\"", "sh", ray).Output()
				if err != nil {
					t.Fatal(err)
				}
				if string(out) != c.want {
					t.Errorf("%s: py = %q, want %q", impl.name, out, c.want)
				}
			}
		})
	}
	out, err := exec.Command("/bin/sh", "-c", "ray=$1; py=\n"+PythonOfRay+"\nprintf %s \"$py\"", "sh", filepath.Join(dir, "absent")).Output()
	if err != nil || string(out) != "python3" {
		t.Errorf("a ray command that is not there: py = %q (%v), want python3", out, err)
	}
}
