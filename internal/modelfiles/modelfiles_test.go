package modelfiles

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// python3 runs a script as a node would, on this machine (the scripts need
// only Python's standard library): no node, no lab.
func python3(t *testing.T, script string, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// model is a small model directory, laid out as a Hugging Face cache
// snapshot (<repo>/snapshots/<commit>): a weights file larger than one
// receive buffer, a config, a nested tokenizer file, a symlink into the
// repository's blobs/ (as the Hub's client makes them), and a .partial
// that is not the model's.
func model(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "models--org--tiny")
	dir := filepath.Join(repo, "snapshots", "0123abcd")
	files := map[string][]byte{"model.safetensors": make([]byte, 9<<20+7), "config.json": []byte(`{"a": 1}`),
		"tokenizer/vocab.txt": []byte("hello\nworld\n")}
	_, _ = rand.Read(files["model.safetensors"])
	for n, b := range files {
		write(t, dir, n, b)
	}
	write(t, filepath.Join(repo, "blobs"), "blob", []byte("linked"))
	if err := os.Symlink("../../blobs/blob", filepath.Join(dir, "linked.bin")); err != nil {
		t.Fatal(err)
	}
	files["linked.bin"] = []byte("linked")
	write(t, dir, "other.partial", []byte("in flight"))
	return dir, files
}

func TestManifestScript(t *testing.T) {
	dir, files := model(t)
	out, stderr, code := python3(t, ManifestScript, nil, dir, "hash")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m, missing, err := ParseManifest(out)
	if err != nil || missing {
		t.Fatalf("%v %v", missing, err)
	}
	if len(m) != len(files) {
		t.Fatalf("manifest %v, want the %d files (no .partial)", m, len(files))
	}
	for n, b := range files {
		want := File{Size: int64(len(b)), SHA256: sum(b)}
		if n == "linked.bin" {
			want.Blob = "blob" // the name of what it links to
		}
		if m[n] != want {
			t.Errorf("%s: %+v, want %+v", n, m[n], want)
		}
	}
	out, _, _ = python3(t, ManifestScript, nil, dir, "sizes")
	l, _, err := ParseManifest(out)
	if err != nil || l["config.json"] != (File{Size: 8}) {
		t.Errorf("a listing: %+v %v", l["config.json"], err)
	}
	out, _, _ = python3(t, ManifestScript, nil, filepath.Join(dir, "nope"), "sizes")
	if _, missing, err := ParseManifest(out); !missing || err != nil {
		t.Errorf("a missing directory: %v %v", missing, err)
	}
}

// Links leave the model nowhere (issue 33): a link to a file outside it
// (the SSH user's own 0600 key), to a directory outside it (/etc), one that
// leads to nothing (a broken snapshot), a loop, a FIFO (it would hang the
// hash) and a name with a newline are each refused, named, in both modes;
// nothing of what they point to is read. A link that stays inside is
// followed.
func TestManifestScriptRefusesWhatLeavesTheModel(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "id_ed25519", []byte("PRIVATE KEY"))
	if err := os.Chmod(filepath.Join(outside, "id_ed25519"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		plant      func(dir string) error
	}{
		{"a link to a file outside", `"tokenizer.model": a link to ` + filepath.Join(outside, "id_ed25519") + `, outside the model`,
			func(dir string) error {
				return os.Symlink(filepath.Join(outside, "id_ed25519"), filepath.Join(dir, "tokenizer.model"))
			}},
		{"a link to a directory outside", `"etc": a link to /etc, outside the model`,
			func(dir string) error { return os.Symlink("/etc", filepath.Join(dir, "etc")) }},
		{"a dangling link", `"gone.safetensors": a link to`,
			func(dir string) error { return os.Symlink("nowhere", filepath.Join(dir, "gone.safetensors")) }},
		{"a loop", `"tokenizer/up": a link loop`,
			func(dir string) error { return os.Symlink("..", filepath.Join(dir, "tokenizer", "up")) }},
		{"a FIFO", `"pipe": not a regular file`,
			func(dir string) error { return exec.Command("mkfifo", filepath.Join(dir, "pipe")).Run() }},
		{"a newline in a name", `not a plain path`,
			func(dir string) error { return os.WriteFile(filepath.Join(dir, "x\n@@done ..", "y"), nil, 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := model(t)
			if c.name == "a newline in a name" {
				_ = os.Mkdir(filepath.Join(dir, "x\n@@done .."), 0o755)
			}
			if err := c.plant(dir); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{"sizes", "hash"} {
				out, stderr, code := python3(t, ManifestScript, nil, dir, mode)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", mode, code, stderr)
				}
				if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, sum([]byte("PRIVATE KEY"))) {
					t.Fatalf("%s: the file outside was read: %s", mode, out)
				}
				_, _, err := ParseManifest(out)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: want an error naming %q, got %v", mode, c.want, err)
				}
			}
		})
	}
	// A link that stays inside the model is followed.
	dir, _ := model(t)
	if err := os.Symlink("config.json", filepath.Join(dir, "config.link.json")); err != nil {
		t.Fatal(err)
	}
	if m := manifestOf(t, dir); m["config.link.json"].Size != 8 {
		t.Fatalf("a link inside the model: %+v", m["config.link.json"])
	}
}

func TestParseManifestRefuses(t *testing.T) {
	for _, out := range []string{"", `{"path": "a", "size": 1}`, "not json\n@@end", `{"path": "../etc/passwd", "size": 1}` + "\n@@end",
		`{"path": "/etc/passwd", "size": 1}` + "\n@@end", `{"path": "a/../../b", "size": 1}` + "\n@@end"} {
		if _, _, err := ParseManifest(out); err == nil {
			t.Errorf("%q parsed", out)
		}
	}
}

func TestMissing(t *testing.T) {
	want := Manifest{"a": {Size: 1, SHA256: "aa"}, "b": {Size: 2, SHA256: "bb"}, "c": {Size: 3, SHA256: "cc"}, "d": {Size: 4, SHA256: "dd"}}
	have := Manifest{"a": {Size: 1}, "b": {Size: 5}, "d": {Size: 4, SHA256: "xx"}, "extra": {Size: 9}}
	if got := strings.Join(Missing(want, have), ","); got != "b,c,d" {
		t.Errorf("missing %q, want b (size), c (absent), d (hash)", got)
	}
}

// copyEnds runs a receiver into dst and a sender from src for job, side
// by side, as two nodes would: both outputs and exit codes.
func copyEnds(t *testing.T, job Job, src, dst string) (recv, send string, recvCode, sendCode int) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j := job
		j.Dir = dst
		var stderr string
		recv, stderr, recvCode = python3(t, ReceiveScript, j.Stdin())
		recv += stderr
	}()
	j := job
	j.Dir = src
	var stderr string
	send, stderr, sendCode = python3(t, SendScript, j.Stdin())
	send += stderr
	wg.Wait()
	return recv, send, recvCode, sendCode
}

// copyEndsLimited is copyEnds with the receiver's files limited to blocks
// of 512 bytes (the shell's ulimit -f).
func copyEndsLimited(t *testing.T, job Job, src, dst string, blocks int) (recv, send string, recvCode, sendCode int) {
	t.Helper()
	limited := fmt.Sprintf("import resource, sys\nresource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))\nexec(compile(%q, \"<receiver>\", \"exec\"))\n",
		blocks*512, blocks*512, ReceiveScript)
	var wg sync.WaitGroup
	wg.Go(func() {
		j := job
		j.Dir = dst
		var stderr string
		recv, stderr, recvCode = python3(t, limited, j.Stdin())
		recv += stderr
	})
	j := job
	j.Dir = src
	var stderr string
	send, stderr, sendCode = python3(t, SendScript, j.Stdin())
	send += stderr
	wg.Wait()
	return recv, send, recvCode, sendCode
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func token() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

func manifestOf(t *testing.T, dir string) Manifest {
	t.Helper()
	out, stderr, code := python3(t, ManifestScript, nil, dir, "hash")
	m, _, err := ParseManifest(out)
	if code != 0 || err != nil {
		t.Fatalf("manifest of %s: %d %s %v", dir, code, stderr, err)
	}
	return m
}

func allOf(m Manifest) []string { return Missing(m, Manifest{}) }

func TestCopyLandsVerified(t *testing.T) {
	src, files := model(t)
	m := manifestOf(t, src)
	dst := filepath.Join(t.TempDir(), "models", "tiny")
	job, err := NewJob(m, allOf(m), "", "127.0.0.1", freePort(t), token(), 20)
	if err != nil {
		t.Fatal(err)
	}
	recv, send, rc, sc := copyEnds(t, job, src, dst)
	if rc != 0 || sc != 0 {
		t.Fatalf("receiver %d: %s\nsender %d: %s", rc, recv, sc, send)
	}
	done, receive, verify := Received(recv)
	if receive <= 0 || verify <= 0 {
		t.Errorf("no timing from the receiver: %q", recv)
	}
	if got := len(done); got != len(files) {
		t.Errorf("%d files reported done, want %d:\n%s", got, len(files), recv)
	}
	if got := manifestOf(t, dst); len(Missing(m, got)) != 0 || len(got) != len(m) {
		t.Errorf("the copy differs: %v", Missing(m, got))
	}
	if _, err := os.Stat(filepath.Join(dst, "other.partial")); err == nil {
		t.Error("a .partial that is not the model's was copied")
	}
}

// A copy killed mid-file leaves a .partial; the next copy sends only the
// rest of it, and the file is whole and verified.
func TestCopyResumesAPartialFile(t *testing.T) {
	src, files := model(t)
	m := manifestOf(t, src)
	dst := t.TempDir()
	half := files["model.safetensors"][:4<<20]
	write(t, dst, "model.safetensors.partial", half)
	job, _ := NewJob(m, []string{"model.safetensors"}, "", "127.0.0.1", freePort(t), token(), 20)
	recv, send, rc, sc := copyEnds(t, job, src, dst)
	if rc != 0 || sc != 0 {
		t.Fatalf("receiver %d: %s\nsender %d: %s", rc, recv, sc, send)
	}
	got, err := os.ReadFile(filepath.Join(dst, "model.safetensors"))
	if err != nil || !bytes.Equal(got, files["model.safetensors"]) {
		t.Fatalf("the resumed file differs (%d bytes, %v)", len(got), err)
	}
}

// A file that arrives with another hash than the manifest's is not put in
// place: the receiver fails naming it, and no .partial is left to resume.
func TestCopyRefusesAFileThatDoesNotMatch(t *testing.T) {
	src, _ := model(t)
	m := manifestOf(t, src)
	f := m["config.json"]
	f.SHA256 = strings.Repeat("0", 64)
	m["config.json"] = f
	dst := t.TempDir()
	job, _ := NewJob(m, []string{"config.json"}, "", "127.0.0.1", freePort(t), token(), 20)
	recv, _, rc, _ := copyEnds(t, job, src, dst)
	if rc != 5 || !strings.Contains(recv, "config.json arrived with SHA-256") {
		t.Fatalf("receiver exit %d: %s", rc, recv)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// Whatever else listens on the copy's port gets nothing: the sender makes
// it prove the token first.
func TestSenderRefusesAnImpostor(t *testing.T) {
	src, _ := model(t)
	m := manifestOf(t, src)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_, _ = c.Write(make([]byte, 16))
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		var all bytes.Buffer
		_, _ = all.ReadFrom(c)
		got <- all.Len()
	}()
	job, _ := NewJob(m, allOf(m), src, "127.0.0.1", l.Addr().(*net.TCPAddr).Port, token(), 5)
	_, stderr, code := python3(t, SendScript, job.Stdin())
	if code != 6 || !strings.Contains(stderr, "is not this copy's receiver") {
		t.Fatalf("sender exit %d: %s", code, stderr)
	}
	if n := <-got; n > 48 {
		t.Errorf("the impostor got %d bytes: more than the sender's nonce and proof", n)
	}
}

// A sender without the token writes nothing: the receiver drops it and
// goes on waiting for the real one.
func TestReceiverDropsASenderWithoutTheToken(t *testing.T) {
	src, files := model(t)
	m := manifestOf(t, src)
	dst := t.TempDir()
	job, _ := NewJob(m, []string{"config.json"}, "", "127.0.0.1", freePort(t), token(), 20)
	done := make(chan string, 1)
	go func() {
		j := job
		j.Dir = dst
		out, stderr, code := python3(t, ReceiveScript, j.Stdin())
		done <- fmt.Sprintf("%d %s%s", code, out, stderr)
	}()
	wrong := job
	wrong.Token, wrong.Dir = hex.EncodeToString(token()), src
	_, stderr, code := python3(t, SendScript, wrong.Stdin())
	if code != 6 {
		t.Fatalf("a sender with another token: exit %d: %s", code, stderr)
	}
	right := job
	right.Dir = src
	if _, stderr, code := python3(t, SendScript, right.Stdin()); code != 0 {
		t.Fatalf("the real sender: exit %d: %s", code, stderr)
	}
	if out := <-done; !strings.HasPrefix(out, "0 ") {
		t.Fatalf("receiver: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "config.json")); !bytes.Equal(b, files["config.json"]) {
		t.Errorf("config.json = %q", b)
	}
}

func TestNewJobRefuses(t *testing.T) {
	m := Manifest{"a": {Size: 1, SHA256: "aa"}}
	if _, err := NewJob(m, []string{"b"}, "", "10.0.0.1", 42000, token(), 5); err == nil {
		t.Error("a file outside the manifest")
	}
	if _, err := NewJob(m, []string{"a"}, "", "10.0.0.1", 42000, []byte("short"), 5); err == nil {
		t.Error("a short token")
	}
}

func TestPort(t *testing.T) {
	for _, b := range [][2]byte{{0, 0}, {255, 255}, {3, 232}} {
		if p := Port(b); p < 42000 || p > 42999 {
			t.Errorf("%v: port %d", b, p)
		}
	}
}

func TestCorrupt(t *testing.T) {
	good, bad := strings.Repeat("a", 64), strings.Repeat("b", 64)
	m := Manifest{"model.safetensors": {Size: 1, SHA256: good, Blob: good}, "shard-2.safetensors": {Size: 1, SHA256: good, Blob: bad},
		"config.json": {Size: 1, SHA256: good, Blob: "0123456789012345678901234567890123456789"}, "plain": {Size: 1, SHA256: good}}
	if got := Corrupt(m); !slices.Equal(got, []string{"shard-2.safetensors"}) {
		t.Errorf("corrupt %v, want the LFS file whose hash is not its blob's name (a Git blob's SHA-1 name is not compared)", got)
	}
}

func TestFetchWithoutTheHubClient(t *testing.T) {
	out, stderr, code := python3(t, FetchScript, FetchJob{Repository: "org/model", Revision: "main", Token: "hf_secret"}.Stdin(), "")
	if _, err := exec.Command("python3", "-c", "import huggingface_hub").CombinedOutput(); err == nil {
		t.Skip("this machine's python3 has huggingface_hub: the lab's acceptance test runs the real client")
	}
	if code != 3 || !strings.Contains(stderr, "huggingface_hub is not installed in") || strings.Contains(out+stderr, "hf_secret") {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
}

func TestParseFetch(t *testing.T) {
	dir, commit, err := ParseFetch("noise\n@@path /c/hub/models--o--m/snapshots/abc123\n@@commit abc123\n")
	if err != nil || dir != "/c/hub/models--o--m/snapshots/abc123" || commit != "abc123" {
		t.Errorf("%q %q %v", dir, commit, err)
	}
	if _, _, err := ParseFetch("Traceback ..."); err == nil {
		t.Error("no snapshot parsed")
	}
}

// A full disk on the target is an error naming the file; nothing is put in
// place under the file's name (writes to /dev/full fail as a full disk does).
func TestCopyOntoAFullDisk(t *testing.T) {
	src, _ := model(t)
	m := manifestOf(t, src)
	dst := t.TempDir()
	job, _ := NewJob(m, []string{"config.json", "model.safetensors"}, "", "127.0.0.1", freePort(t), token(), 20)
	// The receiver may write files of 64 KiB at most (RLIMIT_FSIZE: Python
	// ignores SIGXFSZ, so a write past it fails as a full disk's does).
	recv, _, rc, _ := copyEndsLimited(t, job, src, dst, 128)
	if rc != 8 || !strings.Contains(recv, "cannot write "+filepath.Join(dst, "model.safetensors.partial")+": File too large") {
		t.Fatalf("receiver exit %d: %s", rc, recv)
	}
	if _, err := os.Stat(filepath.Join(dst, "model.safetensors")); !os.IsNotExist(err) {
		t.Errorf("a file that could not be written is in place (%v)", err)
	}
	if done, _, _ := Received(recv); len(done) != 0 {
		t.Errorf("reported done: %v", done)
	}
}

// A co-tenant's link where a .partial would be (issue 33, High 2: the
// second user's config.json.partial -> the first user's file) is removed,
// never written through or renamed into place: the victim keeps its bytes,
// and the file lands whole, a regular file of the receiver's own.
func TestReceiverNeverWritesThroughALink(t *testing.T) {
	src, files := model(t)
	m := manifestOf(t, src)
	dst := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim.txt")
	write(t, filepath.Dir(victim), "victim.txt", []byte(strings.Repeat("v", len(files["config.json"]))))
	for _, n := range []string{"config.json.partial", "model.safetensors.partial"} {
		if err := os.Symlink(victim, filepath.Join(dst, n)); err != nil {
			t.Fatal(err)
		}
	}
	job, _ := NewJob(m, []string{"config.json", "model.safetensors"}, "", "127.0.0.1", freePort(t), token(), 20)
	recv, send, rc, sc := copyEnds(t, job, src, dst)
	if rc != 0 || sc != 0 {
		t.Fatalf("receiver %d: %s\nsender %d: %s", rc, recv, sc, send)
	}
	if b, _ := os.ReadFile(victim); string(b) != strings.Repeat("v", len(files["config.json"])) {
		t.Fatalf("the victim's file was written: %q", b)
	}
	for _, n := range []string{"config.json", "model.safetensors"} {
		st, err := os.Lstat(filepath.Join(dst, n))
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("%s: %v %v, want a regular file", n, st, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, n)); !bytes.Equal(got, files[n]) {
			t.Errorf("%s differs from the source", n)
		}
	}
}

// A target directory another user could write (mode 777, as the issue's
// /tmp/shared-models/m), or one in a parent another user owns, is refused
// before anything listens or is written (exit 9, naming it and the fix);
// the same check, TrustScript, says so at plan. A parent with the sticky bit
// (as /tmp) is fine.
func TestReceiverRefusesADirectoryOthersCanWrite(t *testing.T) {
	src, _ := model(t)
	m := manifestOf(t, src)
	shared := filepath.Join(t.TempDir(), "shared-models")
	dst := filepath.Join(shared, "m")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o777); err != nil {
		t.Fatal(err)
	}
	job, _ := NewJob(m, []string{"config.json"}, "", "127.0.0.1", freePort(t), token(), 2)
	j := job
	j.Dir = dst
	out, stderr, rc := python3(t, ReceiveScript, j.Stdin())
	if rc != 9 || !strings.Contains(stderr, "the model's directory "+dst+" is writable by other users (mode 777)") || strings.Contains(out, "@@listening") {
		t.Fatalf("receiver exit %d: %s%s", rc, out, stderr)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
	plan, _, _ := python3(t, TrustScript, nil, dst)
	if !strings.Contains(plan, "writable by other users (mode 777)") {
		t.Errorf("TrustScript: %q", plan)
	}
	// Made in a parent others can write, without the sticky bit.
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if plan, _, _ := python3(t, TrustScript, nil, filepath.Join(dst, "new")); !strings.Contains(plan, "its parent "+shared+" is writable by other users") {
		t.Errorf("TrustScript, parent others can write: %q", plan)
	}
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if plan, _, _ := python3(t, TrustScript, nil, filepath.Join(shared, "new")); plan != "" {
		t.Errorf("TrustScript, a sticky parent: %q", plan)
	}
	if os.Geteuid() == 0 {
		// Owned by another user (root can make it so).
		if err := os.Chown(dst, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if plan, _, _ := python3(t, TrustScript, nil, dst); !strings.Contains(plan, "is owned by") || !strings.Contains(plan, "65534") {
			t.Errorf("TrustScript, another user's directory: %q", plan)
		}
	}
}

// A done line is read as JSON and must name a plain path: a file name
// cannot forge one (it was "@@done ../x" from a name with a newline).
func TestReceivedReadsOnlyPlainPaths(t *testing.T) {
	done, _, _ := Received("@@done \"config.json\"\n@@done ../x\n@@done \"../x\"\n@@done \"a\\n@@done b\"\n@@end\n")
	if !slices.Equal(done, []string{"config.json"}) {
		t.Fatalf("done = %q", done)
	}
}

// One idle connection to the receiver's port (any local user, or a fabric
// host, can make one) does not hold up the copy: each connection proves
// the token in a thread of its own under a deadline (issue 33). The old
// receiver took connections one at a time, and the sender, queued behind
// the idle one, gave up (exit 6).
func TestReceiverIsNotStalledByAnIdleConnection(t *testing.T) {
	src, files := model(t)
	m := manifestOf(t, src)
	dst := t.TempDir()
	port := freePort(t)
	job, _ := NewJob(m, []string{"config.json"}, dst, "127.0.0.1", port, token(), 30)
	recv := exec.Command("python3", "-c", ReceiveScript)
	recv.Stdin = bytes.NewReader(job.Stdin())
	stdout, _ := recv.StdoutPipe()
	var stderr bytes.Buffer
	recv.Stderr = &stderr
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 12)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "@@listening\n" {
		t.Fatalf("receiver: %q %v %s", line, err, stderr.String())
	}
	idle, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	send := job
	send.Dir = src
	out, serr, code := python3(t, SendScript, send.Stdin())
	rest, _ := io.ReadAll(stdout)
	if err := recv.Wait(); err != nil || code != 0 {
		t.Fatalf("receiver %v: %s%s\nsender %d: %s%s", err, rest, stderr.String(), code, out, serr)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "config.json")); !bytes.Equal(got, files["config.json"]) {
		t.Fatal("config.json did not arrive")
	}
}
