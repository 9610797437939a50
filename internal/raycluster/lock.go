// Locks and start markers: the per-node lock that serializes every
// operation of this provider on a node, and the marker a create leaves on
// the head while it starts Ray, which tells an orphan of a killed create
// from someone else's Ray.

package raycluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// LockScript holds an flock on the node for as long as the provider keeps
// the session open; a crashed provider drops the connection and the lock.
// One lock file serializes every SSH user's applies on the node. Whoever
// comes first creates it (0644); flock needs only a read descriptor, and
// the others open it read-only: /tmp is sticky and, with
// fs.protected_regular, opening another user's file there for writing
// (O_CREAT) is refused even to a writable mode. The holder leaves a note in
// a file of its own ($lock.holder.<uid>) naming its process (pid and start
// time); a refused operation shows a note only when the kernel agrees: the
// file belongs to that uid, and that process is alive and is that uid's.
//
// Nothing here follows a link another user planted (the kernel's
// fs.protected_symlinks may be off): the lock file and the note are created
// with noclobber (O_EXCL: a link in their place, even one to nothing, makes
// the create fail instead of writing through it), and the lock is opened
// only when it is a regular file (a FIFO there would hang every apply).
const LockScript = `lock="${TMPDIR:-/tmp}/terraform-provider-spark.lock"
[ -e "$lock" ] || [ -L "$lock" ] || ( set -C; umask 022; : >"$lock" ) 2>/dev/null
if [ -L "$lock" ] || [ ! -f "$lock" ]; then
  echo "the node lock $lock is not a regular file: $(ls -ln "$lock" 2>&1). Its owner, or root, can remove it" >&2
  exit 74
fi
if ! exec 9<"$lock"; then
  echo "cannot open the node lock $lock: $(ls -ln "$lock" 2>&1). It must be readable by every user of the node (0644); its owner can fix it, or root can remove it" >&2
  exit 74
fi
started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
if ! flock -n 9; then
  who="a process that left no note the kernel confirms"
  for note in "$lock".holder.*; do
    [ -f "$note" ] || continue
    uid=${note##*.}
    [ "$(stat -c %u "$note")" = "$uid" ] || continue
    set -- $(head -n 1 "$note")
    [ "${1:-}" = pid ] && [ -d "/proc/${2:-x}" ] && [ "$(stat -c %u "/proc/$2")" = "$uid" ] && [ "$(started "$2")" = "${3:-}" ] || continue
    who="process $2 of user $(stat -c %U "/proc/$2") (uid $uid), which says: $(sed -n 2p "$note" | head -c 300)"
  done
  echo "another terraform-provider-spark operation holds the lock on this node: $who" >&2
  exit 73
fi
note="$lock.holder.$(id -u)"
rm -f "$note" 2>/dev/null
( set -C; printf 'pid %s %s\n%s\n' "$$" "$(started $$)" "$1" > "$note" ) 2>/dev/null || true
echo locked
cat >/dev/null
rm -f "$note"`

// Holder describes this provider process, for whoever finds the lock held.
func Holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("terraform-provider-spark pid %d on %s since %s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// The start marker says a create is starting Ray on the head for a GCS port:
// written (on the host, in the SSH user's private directory) before the
// head's ray start, removed once the create has finished or rolled back. A
// marker found beside a Ray holding that port is an orphan of a create that
// was killed before it could roll back, so no state knows it; without the
// marker the same Ray is someone else's and the plan refuses to touch it.
// MarkStarting writes the start marker for the head's GCS port.
func (m *Manager) MarkStarting(ctx context.Context, s Spec, holder string) error {
	_, err := m.run(ctx, s.Head.Endpoint, "write the start marker", transport.Script(transport.PrivateDir+`private_dir
printf '%s\n' "$2" > "$private/ray-$1.starting"`, strconv.Itoa(s.GCSPort), holder))
	return err
}

// ClearStarting removes the start marker.
func (m *Manager) ClearStarting(ctx context.Context, s Spec) error {
	_, err := m.run(ctx, s.Head.Endpoint, "remove the start marker",
		transport.Script(transport.PrivateDir+`owned && rm -f -- "$private/ray-$1.starting"; true`, strconv.Itoa(s.GCSPort)))
	return err
}

// StartedBy reads the start marker ("" when there is none, or when the
// directory is not the SSH user's own: a marker anyone could have written
// proves nothing).
func (m *Manager) StartedBy(ctx context.Context, s Spec) (string, error) {
	res, err := m.run(ctx, s.Head.Endpoint, "read the start marker",
		transport.Script(transport.PrivateDir+`owned && cat -- "$private/ray-$1.starting" 2>/dev/null; true`, strconv.Itoa(s.GCSPort)))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// lockOrder is the nodes to lock, each once, in a fixed order (so two
// operations never wait on each other): nodes are told apart by address
// and SSH port (two boxes behind one address are reached on two ports).
func lockOrder(endpoints []transport.Endpoint) []transport.Endpoint {
	seen := map[string]bool{}
	var nodes []transport.Endpoint
	for _, e := range endpoints {
		port := e.Port
		if port == 0 {
			port = transport.DefaultPort
		}
		key := net.JoinHostPort(e.Host, strconv.Itoa(port))
		if !seen[key] {
			seen[key] = true
			nodes = append(nodes, e)
		}
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Host != nodes[j].Host {
			return nodes[i].Host < nodes[j].Host
		}
		return nodes[i].Port < nodes[j].Port
	})
	return nodes
}

// Lock takes the node lock on every endpoint (in a fixed order, so two
// operations never wait on each other) and returns the release. It fails
// fast when another operation holds a lock, naming the holder.
func (m *Manager) Lock(ctx context.Context, holder string, endpoints ...transport.Endpoint) (func(), error) {
	var held []*transport.Held
	release := func() {
		for _, h := range held {
			h.Release()
		}
	}
	for _, e := range lockOrder(endpoints) {
		h, err := (transport.Node{Pool: m.Pool, Endpoint: e}).Hold(ctx, transport.Cmd{Step: "lock node", Argv: transport.Script(LockScript, holder)}, "locked")
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, h)
	}
	return release, nil
}
