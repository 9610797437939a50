package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// childEnv marks the process that serves the simulated nodes for a bench:
// the bench's own test binary, started again, so the provider's process
// measures only the provider.
const childEnv = "SPARK_SIM_NODES_CHILD"

// IsChild reports whether this process was started to serve the nodes.
func IsChild() bool { return os.Getenv(childEnv) == "1" }

// ready is the child's first line: where its nodes listen.
type ready struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// ServeChild is the child's whole life: Options as one JSON line on in,
// the nodes' endpoints as one JSON line on out, then one Stats line on out
// for every "stats" line on in (and "reset" forgets the commands seen, and
// answers the Stats from before), until in ends.
func ServeChild(in io.Reader, out io.Writer) error {
	lines := bufio.NewScanner(in)
	if !lines.Scan() {
		return errors.New("sim child: no options on stdin")
	}
	var o Options
	if err := json.Unmarshal(lines.Bytes(), &o); err != nil {
		return fmt.Errorf("sim child: options: %w", err)
	}
	f, err := Start(o)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(out)
	if err := enc.Encode(ready{Endpoints: f.Endpoints()}); err != nil {
		return err
	}
	for lines.Scan() {
		if err := answerRequest(f, lines.Text(), enc); err != nil {
			return err
		}
	}
	return lines.Err()
}

func answerRequest(f *Fleet, req string, enc *json.Encoder) error {
	if req != "stats" && req != "reset" {
		return fmt.Errorf("sim child: unknown request %q", req)
	}
	s := f.Stats()
	var err error
	if s.CPU, err = ProcessCPU(); err != nil {
		return err
	}
	if req == "reset" {
		f.ResetCommands()
	}
	return enc.Encode(s)
}

// Remote is simulated nodes served by a child process.
type Remote struct {
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Scanner
	endpoints []Endpoint
}

// Spawn starts this program again as the nodes' child (the program must
// call ServeChild first thing when IsChild: a test binary, in TestMain).
func Spawn(o Options) (*Remote, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr // a failing node says why, loudly
	r := &Remote{cmd: cmd}
	if r.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.out = bufio.NewScanner(stdout)
	r.out.Buffer(make([]byte, 64<<10), 16<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var rd ready
	if err := r.request(o, &rd); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("start the simulated nodes: %w", err)
	}
	r.endpoints = rd.Endpoints
	return r, nil
}

// request writes one JSON line (a string as it is) and reads the answer.
func (r *Remote) request(req, answer any) error {
	line, ok := req.(string)
	if !ok {
		b, err := json.Marshal(req)
		if err != nil {
			return err
		}
		line = string(b)
	}
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		return err
	}
	if !r.out.Scan() {
		if err := r.out.Err(); err != nil {
			return fmt.Errorf("the nodes' process: %w", err)
		}
		return errors.New("the nodes' process ended")
	}
	return json.Unmarshal(r.out.Bytes(), answer)
}

// Endpoints are the nodes' addresses and host keys, the head's first.
func (r *Remote) Endpoints() []Endpoint { return append([]Endpoint(nil), r.endpoints...) }

// Stats is what the nodes saw so far, and the child's CPU time.
func (r *Remote) Stats() (Stats, error) {
	var s Stats
	err := r.request("stats", &s)
	return s, err
}

// Reset is Stats, and the commands seen so far are forgotten: the next
// Stats reports what came after.
func (r *Remote) Reset() (Stats, error) {
	var s Stats
	err := r.request("reset", &s)
	return s, err
}

// Close ends the child and waits for it.
func (r *Remote) Close() error {
	_ = r.in.Close()
	return r.cmd.Wait()
}
