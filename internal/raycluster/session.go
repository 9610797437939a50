package raycluster

import (
	"context"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// LeaveSessionScript moves aside the Ray session directory that this SSH
// user's stopped raylet used on a worker ($1: Ray's temp dir). A worker
// joins its head's session: the directory there is named by the head's
// session, and the next raylet to join it opens its files again
// (node_ip_address.json.lock, ray/_private/node.py, Ray 2.52.1; the logs'
// raylet.out). A raylet of another SSH user cannot: the files belong to the
// first ("Permission denied: .../node_ip_address.json.lock"). Moved aside
// under a name that says whose it was, not deleted: the logs stay for the
// operator. Only the user's own directory is touched.
const LeaveSessionScript = `d=$(readlink -f "$1/session_latest" 2>/dev/null) || exit 0
case "$d" in "$1"/session_*) ;; *) exit 0 ;; esac
[ -d "$d" ] && [ -O "$d" ] || exit 0
mv "$d" "$d.left-by-$(id -un)"`

// LeaveSession runs LeaveSessionScript on a worker whose Ray was stopped
// before Ray starts there as another SSH user. In a container the session
// belongs to the container's user, whoever reaches it: nothing to do.
func (m *Manager) LeaveSession(ctx context.Context, s Spec, n NodeSpec) error {
	if s.Runtime.Container != nil {
		return nil
	}
	_, err := m.run(ctx, n.Endpoint, "move aside Ray's session directory on "+n.Name, transport.Script(LeaveSessionScript, tempDir(s.StartArgs)))
	return err
}

// tempDir is Ray's temp dir: --temp-dir in the head's start arguments
// (workers use the head's), else Ray's default.
func tempDir(startArgs []string) string {
	for i, a := range startArgs {
		if v, ok := strings.CutPrefix(a, "--temp-dir="); ok {
			return v
		}
		if a == "--temp-dir" && i+1 < len(startArgs) {
			return startArgs[i+1]
		}
	}
	return "/tmp/ray"
}
