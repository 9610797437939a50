// Package modelcopy puts a model's files on nodes: it reads the manifest at
// the source, lists what each target holds, and copies what a target lacks
// from the source node to the target node over the target's named address
// (internal/modelfiles: the scripts and the copy's protocol), never through
// the machine running Terraform. All of it is SSH through transport.
package modelcopy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/modelfiles"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Node is a directory on a node.
type Node struct {
	Name     string // "source" or the target's key, for messages
	Endpoint transport.Endpoint
	Path     string
	// Address is where a target receives a copy (its fabric IP): the
	// receiver binds it, the source dials it. Unused for the source.
	Address string
	// Lacks, when LacksKnown, is what a refresh found the target lacks of
	// this manifest: Place copies that without reading the target's bytes
	// again. Otherwise Place hashes what the target holds first.
	Lacks      []string
	LacksKnown bool
}

// Manager runs the reads and copies; one per provider process.
type Manager struct {
	Pool *transport.Pool
	// Python runs the scripts on every node ("python3" unless the
	// configuration names another).
	Python string
}

// Error is a failure on one node: the node and the path, and why.
type Error struct {
	Node, Host, Path string
	Err              error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s), %s: %v", e.Node, e.Host, e.Path, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

func (m *Manager) python() string {
	if m.Python == "" {
		return "python3"
	}
	return m.Python
}

// Read lists n's directory: with hash, each file's SHA-256 too (a full
// read of every byte), else names and sizes. missing: no such directory.
func (m *Manager) Read(ctx context.Context, n Node, hash bool) (modelfiles.Manifest, bool, error) {
	conn, err := m.Pool.Get(ctx, n.Endpoint)
	if err != nil {
		return nil, false, &Error{Node: n.Name, Host: n.Endpoint.Host, Path: n.Path, Err: err}
	}
	mode, step := "sizes", "list the model's files"
	if hash {
		mode, step = "hash", "hash the model's files"
	}
	res, err := conn.Run(ctx, transport.Cmd{Step: step, Argv: []string{m.python(), "-c", modelfiles.ManifestScript, n.Path, mode}})
	if err != nil {
		return nil, false, &Error{Node: n.Name, Host: n.Endpoint.Host, Path: n.Path, Err: err}
	}
	man, missing, err := modelfiles.ParseManifest(string(res.Stdout))
	if err != nil {
		return nil, false, &Error{Node: n.Name, Host: n.Endpoint.Host, Path: n.Path, Err: err}
	}
	return man, missing, nil
}

// Place makes every target hold the manifest's files: it hashes what each
// target already has (unless a refresh said what it lacks), and copies what
// it lacks from src, the targets in parallel. It returns, by target, the files it copied there (those a
// destroy may remove), also when some target failed: one error per target
// that did not get all of its files, in target order.
func (m *Manager) Place(ctx context.Context, src Node, man modelfiles.Manifest, targets []Node) (map[string][]string, error) {
	return eachTarget(targets, func(t Node) ([]string, error) { return m.placeOne(ctx, src, man, t) })
}

// eachTarget runs do for every target in parallel: what each returned, by
// name (a target that failed only when it returned something), and the
// errors in target order.
func eachTarget(targets []Node, do func(Node) ([]string, error)) (map[string][]string, error) {
	out := map[string][]string{}
	errs := make([]error, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			files, err := do(t)
			if err == nil || len(files) > 0 {
				mu.Lock()
				out[t.Name] = files
				mu.Unlock()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (m *Manager) placeOne(ctx context.Context, src Node, man modelfiles.Manifest, t Node) ([]string, error) {
	todo := t.Lacks
	if !t.LacksKnown {
		have, _, err := m.Read(ctx, t, true)
		if err != nil {
			return nil, err
		}
		todo = modelfiles.Missing(man, have)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	done, err := m.copy(ctx, src, man, t, todo)
	if err != nil {
		return done, &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: err}
	}
	return done, nil
}

// copy runs one copy's two ends side by side: the receiver on t, the
// sender on src. A port another program holds, or where no receiver proved
// the token (anotherPort), is tried again on another port, twice.
func (m *Manager) copy(ctx context.Context, src Node, man modelfiles.Manifest, t Node, files []string) ([]string, error) {
	recvConn, err := m.Pool.Get(ctx, t.Endpoint)
	if err != nil {
		return nil, err
	}
	sendConn, err := m.Pool.Get(ctx, src.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("the source: %w", err)
	}
	var lastErr error
	for range 3 {
		token := make([]byte, 32)
		var p [2]byte
		_, _ = rand.Read(token)
		_, _ = rand.Read(p[:])
		job, err := modelfiles.NewJob(man, files, t.Path, t.Address, modelfiles.Port(p), token, 60)
		if err != nil {
			return nil, err
		}
		done, err := m.runTogether(ctx, recvConn, sendConn, job, src.Path)
		if anotherPort(err) {
			lastErr = err
			continue
		}
		return done, err
	}
	return nil, lastErr
}

// anotherPort: the attempt failed on its port, not on the model: another
// program holds it (the receiver's exit 3), or what answered there did not
// prove the token in time (the sender's exit 6: a squatter, or a receiver
// held up past the handshake's deadline). The copy is tried again on
// another port.
func anotherPort(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.ExitStatus == 3 || te.ExitStatus == 6)
}

// runTogether is run with both ends' max_parallel slots taken at once.
func (m *Manager) runTogether(ctx context.Context, recvConn, sendConn *transport.Conn, job modelfiles.Job, srcDir string) ([]string, error) {
	ctx, release, err := m.Pool.TakeSlots(ctx, 2)
	if err != nil {
		return nil, err
	}
	defer release()
	return m.run(ctx, recvConn, sendConn, job, srcDir)
}

// run is one attempt: both ends side by side. The first to fail stops the
// other (neither waits out its timeout), and its error is the attempt's.
func (m *Manager) run(ctx context.Context, recvConn, sendConn *transport.Conn, job modelfiles.Job, srcDir string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first error
	var once sync.Once
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	var recvOut string
	got := make(chan struct{})
	go func() {
		defer close(got)
		res, err := recvConn.Run(ctx, transport.Cmd{Step: "receive the model's files",
			Argv: []string{m.python(), "-c", modelfiles.ReceiveScript}, Stdin: job.Stdin()})
		if res != nil {
			recvOut = string(res.Stdout)
		}
		if err != nil {
			fail(err)
		}
	}()
	send := job
	send.Dir = srcDir
	if _, err := sendConn.Run(ctx, transport.Cmd{Step: "send the model's files",
		Argv: []string{m.python(), "-c", modelfiles.SendScript}, Stdin: send.Stdin()}); err != nil {
		fail(fmt.Errorf("the source: %w", err))
	}
	<-got
	done, receive, verify := modelfiles.Received(recvOut)
	tflog.Debug(ctx, "model copy", map[string]any{"node": recvConn.Addr(), "files": len(done),
		"receive_ms": int64(receive * 1000), "verify_ms": int64(verify * 1000)})
	return done, first
}

// Remove deletes files (and their .partial) from t's directory, then the
// directories that left empty.
func (m *Manager) Remove(ctx context.Context, t Node, files []string) error {
	if len(files) == 0 {
		return nil
	}
	conn, err := m.Pool.Get(ctx, t.Endpoint)
	if err != nil {
		return &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: err}
	}
	sorted := slices.Sorted(slices.Values(files))
	for _, f := range sorted {
		// Names come from state: one that could leave the directory is
		// never handed to rm (a forged report once put "../x" there).
		if err := modelfiles.CheckPath(f); err != nil {
			return &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: fmt.Errorf("not removed: %w", err)}
		}
	}
	if _, err := conn.Run(ctx, transport.Cmd{Step: "remove the model's files",
		Argv: transport.Script(modelfiles.RemoveScript, append([]string{t.Path}, sorted...)...)}); err != nil {
		return &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: err}
	}
	return nil
}

// Drift lists, for each target read, the manifest's files it lacks now, by a
// listing of names and sizes (never a read of the bytes), or with hash by
// every file's SHA-256 too; a target whose directory is gone lacks them
// all. Targets that cannot be read are an error naming them.
func (m *Manager) Drift(ctx context.Context, man modelfiles.Manifest, targets []Node, hash bool) (map[string][]string, error) {
	return eachTarget(targets, func(t Node) ([]string, error) {
		have, _, err := m.Read(ctx, t, hash)
		if err != nil {
			return nil, err
		}
		return modelfiles.Missing(man, have), nil
	})
}

// Fetch puts a Hugging Face repository's snapshot in src's cache with the
// Hub's client there, and returns its directory and the commit the job's
// revision resolved to. The job's token reaches the node on stdin only.
func (m *Manager) Fetch(ctx context.Context, src Node, job modelfiles.FetchJob) (dir, commit string, err error) {
	fail := func(err error) (string, string, error) {
		return "", "", &Error{Node: src.Name, Host: src.Endpoint.Host, Path: job.Repository, Err: err}
	}
	conn, err := m.Pool.Get(ctx, src.Endpoint)
	if err != nil {
		return fail(err)
	}
	res, err := conn.Run(ctx, transport.Cmd{Step: "fetch the model from the Hugging Face Hub",
		Argv: []string{m.python(), "-c", modelfiles.FetchScript}, Stdin: job.Stdin()})
	if err != nil {
		return fail(err)
	}
	if dir, commit, err = modelfiles.ParseFetch(string(res.Stdout)); err != nil {
		return fail(err)
	}
	return dir, commit, nil
}
