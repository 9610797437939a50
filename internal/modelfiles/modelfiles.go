// Package modelfiles holds what spark_model runs on the nodes and reads
// back, as pure values: the manifest script and its parser, the plan of a
// copy (which files a target lacks), and the receiver and sender of a copy
// between two nodes, with the job each is given on its standard input.
// Nothing here does I/O; internal/modelcopy runs these over SSH.
//
// A copy goes from node to node over the address the operator names (the
// fabric), never through the operator's machine. The receiver listens on
// that address only, for one sender, on a port chosen for this copy; both
// ends hold a random token, given to each over its own SSH session (stdin,
// never argv), and each proves it to the other (HMAC-SHA256 over both
// ends' nonces) before a byte of the model moves: a program that happens
// to listen on the port gets nothing, and nothing but the sender can write
// into the model's directory. Each file arrives as <name>.partial, is
// hashed as it arrives, and becomes <name> only when its SHA-256 is the
// manifest's; a copy that stops resumes from what the .partial holds.
package modelfiles

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// File is one file of a model as the manifest has it.
type File struct {
	Size   int64
	SHA256 string // hex
	// Blob is, for a file of a Hugging Face cache snapshot, the name of the
	// blob it links to: for a file kept in Git LFS (the weights), the
	// SHA-256 the Hub gave it. "" otherwise.
	Blob string
}

// Manifest is a model directory's files by their path below it ("/"
// separated, never absolute, never with "..").
type Manifest map[string]File

// Bytes is the model's size.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m {
		n += f.Size
	}
	return n
}

// ManifestScript prints the files below a directory ($1): with $2 = "hash"
// each file's size, SHA-256 and path, else size and path only (a listing in
// milliseconds, for drift). .partial files (a copy under way) are not the
// model's. A directory that does not exist prints @@missing. One JSON
// object per line, so any file name survives.
//
// Links are followed only where they stay in the model: their real path
// inside the directory, or, for a Hugging Face cache snapshot
// (<repo>/snapshots/<commit>, whose files are links into <repo>/blobs/),
// inside that repository's blobs/. A link anywhere else (a key, a token,
// /etc: a co-tenant who can write a shared source needs only ln -s), a
// link that leads to nothing, a link loop, anything but a regular file (a
// FIFO would hang the hash, a device never end), and an entry that cannot
// be read are each printed as {"refused": path, "why": ...}: the parser
// refuses the model, naming them, rather than drop a file or ship another.
const ManifestScript = `
import hashlib, json, os, stat, sys
top, mode = sys.argv[1], sys.argv[2]
if not os.path.isdir(top):
    print("@@missing")
    sys.exit(0)
real_top = os.path.realpath(top)
inside = [real_top]
snapshots = os.path.dirname(real_top)
if os.path.basename(snapshots) == "snapshots":
    inside.append(os.path.join(os.path.dirname(snapshots), "blobs"))
def within(p):
    return any(p == d or p.startswith(d.rstrip(os.sep) + os.sep) for d in inside)
def refuse(full, why):
    print(json.dumps({"refused": os.path.relpath(full, top).replace(os.sep, "/"), "why": why}))
def walk_error(e):
    refuse(e.filename, "cannot be read: " + (e.strerror or str(e)))
for root, dirs, files in os.walk(top, followlinks=True, onerror=walk_error):
    real_root = os.path.realpath(root)
    keep = []
    for name in sorted(dirs):
        full = os.path.join(root, name)
        if os.path.islink(full):
            real = os.path.realpath(full)
            if not within(real):
                refuse(full, "a link to %s, outside the model" % real)
                continue
            if real == real_root or real_root.startswith(real.rstrip(os.sep) + os.sep):
                refuse(full, "a link loop (to %s)" % real)
                continue
        keep.append(name)
    dirs[:] = keep
    for name in sorted(files):
        if name.endswith(".partial"):
            continue
        full = os.path.join(root, name)
        rel = os.path.relpath(full, top).replace(os.sep, "/")
        link = os.path.islink(full)
        real = os.path.realpath(full)
        if link and not within(real):
            refuse(full, "a link to %s, outside the model" % real)
            continue
        try:
            st = os.stat(full)
        except OSError as e:
            refuse(full, ("a link to %s, which does not exist" % real) if link else "cannot be read: " + (e.strerror or str(e)))
            continue
        if not stat.S_ISREG(st.st_mode):
            refuse(full, "not a regular file (a FIFO, socket or device)")
            continue
        entry = {"path": rel, "size": st.st_size}
        if link:
            entry["blob"] = os.path.basename(real)
        if mode == "hash":
            h = hashlib.sha256()
            try:
                with open(full, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 22), b""):
                        h.update(chunk)
            except OSError as e:
                refuse(full, "cannot be read: " + (e.strerror or str(e)))
                continue
            entry["sha256"] = h.hexdigest()
        print(json.dumps(entry))
print("@@end")
`

// ParseManifest reads ManifestScript's output: the manifest, or missing
// true when the directory does not exist. Without hashes (a listing), each
// File's SHA256 is "".
func ParseManifest(out string) (m Manifest, missing bool, err error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 0 && lines[0] == "@@missing" {
		return nil, true, nil
	}
	if len(lines) == 0 || lines[len(lines)-1] != "@@end" {
		return nil, false, fmt.Errorf("the file listing is truncated (no end marker): %q", tail(out))
	}
	m = Manifest{}
	var refused []string
	for _, line := range lines[:len(lines)-1] {
		var e struct {
			Path    string `json:"path"`
			Size    int64  `json:"size"`
			SHA256  string `json:"sha256"`
			Blob    string `json:"blob"`
			Refused string `json:"refused"`
			Why     string `json:"why"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, false, fmt.Errorf("the file listing has an unreadable line %q: %w", line, err)
		}
		if e.Refused != "" {
			refused = append(refused, fmt.Sprintf("%q: %s", e.Refused, e.Why))
			continue
		}
		if err := CheckPath(e.Path); err != nil {
			return nil, false, err
		}
		m[e.Path] = File{Size: e.Size, SHA256: e.SHA256, Blob: e.Blob}
	}
	if len(refused) > 0 {
		return nil, false, &RefusedError{Entries: refused}
	}
	return m, false, nil
}

// RefusedError names the entries of a model directory that cannot be part
// of the model (ManifestScript: links out of it, dangling links, loops,
// FIFOs and devices, unreadable entries).
type RefusedError struct{ Entries []string }

func (e *RefusedError) Error() string {
	return "the model's directory holds what cannot be copied as part of it: " + strings.Join(e.Entries, "; ") +
		". A link must stay inside the model's directory (or, for a Hugging Face cache snapshot, its repository's blobs/); " +
		"remove or replace these entries, or give a directory that holds only the model"
}

// lfsBlob is a blob name that is a SHA-256: a Git LFS file's, as the Hub
// names it in the cache (a Git blob's name is a 40-digit SHA-1).
var lfsBlob = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Corrupt lists, sorted, the files of a Hugging Face snapshot whose bytes
// do not hash to the SHA-256 the Hub gave them (their blob's name): an
// interrupted or damaged download a size check would miss.
func Corrupt(m Manifest) []string {
	var out []string
	for p, f := range m {
		if lfsBlob.MatchString(f.Blob) && f.SHA256 != "" && f.SHA256 != f.Blob {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// CheckPath refuses a path that could leave the model's directory, and one
// with a control character: a newline in a name would forge a line of the
// receiver's report (@@done ../x), and no model needs one.
func CheckPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") ||
		strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("file path %q is not a plain path below the model's directory (no \"..\", no control characters)", p)
	}
	return nil
}

// Missing lists, sorted, the files of want that have lacks: absent, or of
// another size (a listing shows no more), or, where have holds hashes,
// with another SHA-256. Files have holds beyond want are not the model's
// business and are left alone.
func Missing(want, have Manifest) []string {
	var out []string
	for p, f := range want {
		h, ok := have[p]
		if !ok || h.Size != f.Size || h.SHA256 != "" && f.SHA256 != "" && h.SHA256 != f.SHA256 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Job is what both ends of one copy read on their standard input: the
// files to move (with the manifest's size and hash), the directory each
// end reads or writes, where the receiver listens, and the token.
type Job struct {
	Dir     string    `json:"dir"`
	Address string    `json:"address"` // the receiver's: the IP it binds to, the sender dials
	Port    int       `json:"port"`
	Token   string    `json:"token"` // hex, 32 bytes
	Files   []JobFile `json:"files"`
	// Wait is how long the receiver waits for its sender, and the sender
	// for the receiver to listen, in seconds.
	Wait int `json:"wait"`
}

// JobFile is one file of a Job.
type JobFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// NewJob is the job that copies files (paths of m) to dir, the receiver
// listening on address:port; token is 32 random bytes.
func NewJob(m Manifest, files []string, dir, address string, port int, token []byte, wait int) (Job, error) {
	if len(token) != 32 {
		return Job{}, fmt.Errorf("a copy token is 32 bytes, not %d", len(token))
	}
	j := Job{Dir: dir, Address: address, Port: port, Token: hex.EncodeToString(token), Wait: wait}
	for _, p := range files {
		f, ok := m[p]
		if !ok {
			return Job{}, fmt.Errorf("%s is not in the manifest", p)
		}
		if err := CheckPath(p); err != nil {
			return Job{}, err
		}
		j.Files = append(j.Files, JobFile{Path: p, Size: f.Size, SHA256: f.SHA256})
	}
	return j, nil
}

// Stdin is the job as a line for a script's standard input.
func (j Job) Stdin() []byte {
	b, _ := json.Marshal(j) // strings, ints and slices of them: cannot fail
	return append(b, '\n')
}

// copyPrelude is what both ends of a copy start with: the job from stdin,
// the token, an exit with a message, and a read of exactly n bytes.
const copyPrelude = `
import hashlib, hmac, json, os, socket, sys, time
job = json.loads(sys.stdin.readline())
token = bytes.fromhex(job["token"])
def fail(code, msg):
    print(msg, file=sys.stderr)
    sys.exit(code)
# A handshake is three short messages: seconds, or someone else is there.
HANDSHAKE = 10
def exact(c, n):
    b = bytearray()
    while len(b) < n:
        part = c.recv(n - len(b))
        if not part:
            raise ConnectionError("the other end closed the connection")
        b += part
    return bytes(b)
`

// ReceiveScript is the receiving end of a copy; its job on stdin, its
// directory the job's (made if missing). It first checks the directory is
// the SSH user's alone (exit 9, naming the directory and its owner, when
// another user owns it or could write in it, or in the parent it is made
// in, or put a link on the way: TrustScript, the same check the plan runs),
// then opens it once and does everything relative to it, never following a
// link: each file arrives in a .partial it created itself (exclusive
// create, or one it created before, to resume: a regular file of its own),
// and only that file is renamed into place. It binds the job's address and
// port (exit 3 when it cannot: another program holds the port), prints
// @@listening, and waits for a sender that proves the token (others are
// dropped). It tells the sender how much of each file a .partial already
// holds and receives the rest at the network's speed; then it hashes each
// whole file and renames it into place only when its SHA-256 is the job's
// (exit 5 when it is not, the .partial removed). @@done <path as JSON> per
// file (a JSON string: no name can forge a line), @@timing <receive s>
// <verify s>, @@end when all are in place. Exit 8: a file cannot be written
// (a full disk: the message names the file). Exit 4: no sender came in
// time, or it stopped mid-file (the .partial keeps what arrived).
const ReceiveScript = copyPrelude + trustPython + `
import errno, stat
why = untrusted(job["dir"])
if why:
    fail(9, why)
me = os.geteuid()
def own_dir(fd, name):
    """The subdirectory name of fd, made if missing, opened without following a link."""
    try:
        os.mkdir(name, 0o755, dir_fd=fd)
    except FileExistsError:
        pass
    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    st = os.fstat(sub)
    if st.st_uid != me or st.st_mode & 0o022:
        fail(9, "%s/%s is not this user's alone (owner uid %d, mode %o)" % (job["dir"], name, st.st_uid, stat.S_IMODE(st.st_mode)))
    return sub
top = job["dir"].rstrip("/") or "/"
made = []
p = top
while not os.path.isdir(p):
    made.append(os.path.basename(p))
    p = os.path.dirname(p)
fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
for name in reversed(made):
    fd = own_dir(fd, name)
st = os.fstat(fd)
if st.st_uid != me or st.st_mode & 0o022:
    fail(9, "%s is not this user's alone (owner uid %d, mode %o)" % (top, st.st_uid, stat.S_IMODE(st.st_mode)))
def place(rel):
    """The directory fd that holds rel, and rel's last component."""
    parts = rel.split("/")
    d = fd
    for name in parts[:-1]:
        d = own_dir(d, name)
    return d, parts[-1]
def own_partial(d, name):
    """The size of name.partial in d if it is a regular file of this user's,
    else 0 (anything else there, a link too, is removed, never followed)."""
    try:
        st = os.stat(name + ".partial", dir_fd=d, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    if stat.S_ISREG(st.st_mode) and st.st_uid == me:
        return st.st_size
    os.unlink(name + ".partial", dir_fd=d)
    return 0
family = socket.AF_INET6 if ":" in job["address"] else socket.AF_INET
s = socket.socket(family, socket.SOCK_STREAM)
try:
    s.bind((job["address"], job["port"]))
except OSError as e:
    fail(3, "cannot listen on %s port %d: %s" % (job["address"], job["port"], e))
s.listen(16)
print("@@listening", flush=True)
# Each connection proves the token in a thread of its own, under a
# deadline: one that connects and says nothing (anyone on the node or the
# fabric can) neither holds up the sender's nor keeps the receiver past it.
import threading
chosen, lock = [], threading.Lock()
won = threading.Event()
def handshake(c):
    c.settimeout(HANDSHAKE)
    try:
        mine = os.urandom(16)
        c.sendall(mine)
        theirs = exact(c, 48)
        want = hmac.new(token, b"send" + mine + theirs[:16], hashlib.sha256).digest()
        if hmac.compare_digest(theirs[16:], want):
            with lock:
                if not chosen:
                    c.sendall(hmac.new(token, b"recv" + theirs[:16] + mine, hashlib.sha256).digest())
                    chosen.append(c)
                    won.set()
                    return
    except (OSError, ConnectionError):
        pass
    c.close()
def accept():
    while not won.is_set():
        try:
            c, peer = s.accept()
        except OSError:
            return
        threading.Thread(target=handshake, args=(c,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
if not won.wait(job["wait"]):
    fail(4, "no sender proved the token on %s port %d within %d s" % (job["address"], job["port"], job["wait"]))
try:
    s.shutdown(socket.SHUT_RDWR)  # wakes the accept thread (close alone would not)
except OSError:
    pass
s.close()
c = chosen[0]
c.settimeout(60)
offsets = []
for f in job["files"]:
    try:
        d, name = place(f["path"])
        have = own_partial(d, name)
    except OSError as e:
        fail(8, "cannot write %s/%s: %s" % (top, f["path"], e.strerror or e))
    offsets.append(have if have <= f["size"] else 0)
c.sendall((json.dumps(offsets) + "\n").encode())
buf = bytearray(1 << 22)
view = memoryview(buf)
start = time.monotonic()
NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
def receive(d, name, f, off):
    flags = os.O_WRONLY | NOFOLLOW | (0 if off else os.O_CREAT | os.O_EXCL)
    if not off:
        own_partial(d, name)
    with os.fdopen(os.open(name + ".partial", flags, 0o644, dir_fd=d), "wb") as out:
        if off:
            out.seek(off)
            out.truncate()
        left = f["size"] - off
        while left:
            try:
                n = c.recv_into(view, min(left, len(buf)))
            except OSError as e:
                fail(4, "the copy of %s stopped: %s" % (f["path"], e))
            if not n:
                fail(4, "the sender stopped in %s with %d bytes to go" % (f["path"], left))
            out.write(view[:n])
            left -= n
for f, off in zip(job["files"], offsets):
    try:
        d, name = place(f["path"])
        receive(d, name, f, off)
    except OSError as e:
        fail(8, "cannot write %s/%s.partial: %s" % (top, f["path"], e.strerror or e))
c.close()
received = time.monotonic()
for f in job["files"]:
    d, name = place(f["path"])
    h = hashlib.sha256()
    with os.fdopen(os.open(name + ".partial", os.O_RDONLY | NOFOLLOW, dir_fd=d), "rb") as src:
        for chunk in iter(lambda: src.read(1 << 22), b""):
            h.update(chunk)
    if h.hexdigest() != f["sha256"]:
        os.unlink(name + ".partial", dir_fd=d)
        fail(5, "%s arrived with SHA-256 %s, the manifest has %s" % (f["path"], h.hexdigest(), f["sha256"]))
    os.replace(name + ".partial", name, src_dir_fd=d, dst_dir_fd=d)
    print("@@done " + json.dumps(f["path"]), flush=True)
print("@@timing %.3f %.3f" % (received - start, time.monotonic() - received))
c.close()
print("@@end")
`

// trustPython is untrusted(path), shared by ReceiveScript and TrustScript:
// why the SSH user must not write the model into path, or None. Every
// existing directory from / down to path, links followed, must be owned by
// this user or root and writable by no one else, except an ancestor with
// the sticky bit (as /tmp: others cannot move or delete what is not
// theirs); a link on the way must be this user's or root's; and path itself,
// when it exists, must be this user's (root's only for root). The first
// directory made is made in the deepest that exists, so that one is the
// parent checked. No model is written where another user could plant a link
// for the receiver to write through, or swap the directory under it.
const trustPython = `
import os, pwd, stat
def owner(uid):
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid
def untrusted(path):
    me = os.geteuid()
    todo = [c for c in os.path.abspath(path).split("/") if c]
    cur, links = "/", 0
    while True:
        st = os.stat(cur)
        last = not todo
        what = ("the model's directory " if last else "its parent ") + cur
        if st.st_uid not in (me, 0) or last and st.st_uid != me:
            return "%s is owned by %s, not by this SSH user: %s" % (what, owner(st.st_uid),
                "give a directory of your own." if last else "its owner could put links in it for this copy to write through. Give a directory of your own.")
        if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
            return ("%s is writable by other users (mode %o): they could put links in it for this copy to write through. "
                    "Remove their write access (chmod go-w %s), or give a directory of your own.") % (what, stat.S_IMODE(st.st_mode), cur)
        if last:
            return None
        c = todo.pop(0)
        if c == ".":
            continue
        if c == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, c)
        try:
            lst = os.lstat(nxt)
        except FileNotFoundError:
            return None  # made in cur, checked above
        if stat.S_ISLNK(lst.st_mode):
            if lst.st_uid not in (me, 0):
                return "%s is a link owned by %s, another user: give the directory's real path." % (nxt, owner(lst.st_uid))
            links += 1
            if links > 40:
                return "%s: too many levels of links" % path
            target = os.readlink(nxt)
            todo = [x for x in target.split("/") if x] + todo
            if target.startswith("/"):
                cur = "/"
            continue
        if not stat.S_ISDIR(lst.st_mode):
            return "%s is not a directory" % nxt
        cur = nxt
`

// TrustScript prints why the SSH user must not write a model into $1
// (trustPython), or nothing: what the plan checks of each target (D23).
const TrustScript = trustPython + `
import sys
why = untrusted(sys.argv[1])
if why:
    print(why)
`

// SendScript is the sending end of a copy; its job on stdin, its directory
// the source's. It dials the receiver (retrying until the job's wait is
// up), makes the receiver prove the token before anything is sent (exit 6
// when it cannot: something else listens there), checks each file still
// has the manifest's size (exit 7), and sends what the receiver lacks with
// sendfile. @@end when all is sent.
const SendScript = copyPrelude + `
for f in job["files"]:
    size = os.path.getsize(os.path.join(job["dir"], f["path"]))
    if size != f["size"]:
        fail(7, "%s on the source is %d bytes, the manifest has %d: the source changed" % (f["path"], size, f["size"]))
deadline = time.monotonic() + job["wait"]
while True:
    try:
        c = socket.create_connection((job["address"], job["port"]), timeout=5)
        break
    except OSError as e:
        if time.monotonic() > deadline:
            fail(4, "cannot reach the receiver at %s port %d: %s" % (job["address"], job["port"], e))
        time.sleep(0.2)
c.settimeout(HANDSHAKE)
try:
    theirs = exact(c, 16)
    mine = os.urandom(16)
    c.sendall(mine + hmac.new(token, b"send" + theirs + mine, hashlib.sha256).digest())
    proof = exact(c, 32)
except (OSError, ConnectionError) as e:
    fail(6, "%s port %d is not this copy's receiver: %s" % (job["address"], job["port"], e))
if not hmac.compare_digest(proof, hmac.new(token, b"recv" + mine + theirs, hashlib.sha256).digest()):
    fail(6, "%s port %d is not this copy's receiver: it did not prove the token" % (job["address"], job["port"]))
c.settimeout(60)
line = b""
while not line.endswith(b"\n"):
    part = c.recv(65536)
    if not part:
        fail(4, "the receiver closed the connection before the transfer")
    line += part
offsets = json.loads(line)
for f, off in zip(job["files"], offsets):
    with open(os.path.join(job["dir"], f["path"]), "rb") as src:
        if f["size"] > off and c.sendfile(src, off, f["size"] - off) != f["size"] - off:
            fail(7, "%s ended early on the source" % f["path"])
c.shutdown(socket.SHUT_WR)
c.recv(1)
print("@@end")
`

// FetchScript puts a Hugging Face repository's snapshot in the source
// node's cache with the Hub's own client (huggingface_hub.snapshot_download
// of the Python that runs it), and prints its directory and commit. Its job
// on stdin (FetchJob): the token (HF_TOKEN, never argv), the cache
// (HF_HUB_CACHE) and offline (HF_HUB_OFFLINE=1: the cache only), set before
// the client is imported, as it reads them then. Exit 3: no
// huggingface_hub in that Python; 4: the Hub or the cache refused.
const FetchScript = `
import json, os, sys
job = json.loads(sys.stdin.readline())
if job.get("token"):
    os.environ["HF_TOKEN"] = job["token"]
if job.get("cache"):
    os.environ["HF_HUB_CACHE"] = job["cache"]
if job.get("offline"):
    os.environ["HF_HUB_OFFLINE"] = "1"
try:
    from huggingface_hub import snapshot_download
except ImportError as e:
    print("huggingface_hub is not installed in %s: %s" % (sys.executable, e), file=sys.stderr)
    sys.exit(3)
try:
    path = snapshot_download(job["repository"], revision=job["revision"] or None)
except Exception as e:
    print("%s: %s" % (type(e).__name__, e), file=sys.stderr)
    sys.exit(4)
print("@@path " + path)
print("@@commit " + os.path.basename(os.path.normpath(path)))
`

// FetchJob is FetchScript's job.
type FetchJob struct {
	Repository string `json:"repository"`
	Revision   string `json:"revision"`
	Cache      string `json:"cache"`
	Offline    bool   `json:"offline"`
	Token      string `json:"token"`
}

// Stdin is the job as a line for the script's standard input.
func (j FetchJob) Stdin() []byte {
	b, _ := json.Marshal(j) // strings and a bool: cannot fail
	return append(b, '\n')
}

// ParseFetch reads FetchScript's output: the snapshot's directory and the
// commit its revision resolved to.
func ParseFetch(out string) (dir, commit string, err error) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "@@path "); ok {
			dir = v
		} else if v, ok := strings.CutPrefix(line, "@@commit "); ok {
			commit = v
		}
	}
	if dir == "" || commit == "" {
		return "", "", fmt.Errorf("the Hub client printed no snapshot: %q", tail(out))
	}
	return dir, commit, nil
}

// Received reads ReceiveScript's output: the files it put in place, and
// how long it took to receive them and then to verify them (seconds; 0
// when it did not get that far). A done line whose path is not a JSON
// string naming a plain path below the directory is not counted: no file
// name can add one (CheckPath).
func Received(out string) (done []string, receive, verify float64) {
	for _, line := range strings.Split(out, "\n") {
		if q, ok := strings.CutPrefix(line, "@@done "); ok {
			var p string
			if json.Unmarshal([]byte(q), &p) != nil || CheckPath(p) != nil {
				continue
			}
			done = append(done, p)
		} else if t, ok := strings.CutPrefix(line, "@@timing "); ok {
			_, _ = fmt.Sscanf(t, "%g %g", &receive, &verify)
		}
	}
	return done, receive, verify
}

// RemoveScript removes the named files ($2...) below a directory ($1),
// with any .partial beside them, then the directories the removal left
// empty (never the directory's parents). Files it did not copy are kept.
const RemoveScript = `dir=$1; shift
for f in "$@"; do rm -f -- "$dir/$f" "$dir/$f.partial"; done
find "$dir" -depth -type d -empty -delete 2>/dev/null
exit 0
`

func tail(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}

// Port picks a copy's port from b (any 2 random bytes): a port in
// 42000-42999, above Ray's and vLLM's usual ones.
func Port(b [2]byte) int {
	return 42000 + (int(b[0])<<8|int(b[1]))%1000
}
