// Ray's token authentication (RAY_AUTH_MODE=token): the head keeps or gets
// a random token, workers get the head's over stdin, and a destroy removes
// only a token this provider wrote. The token never reaches argv or state.

package raycluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// tokenScript writes stdin to Ray's default token path (0600) unless $1 is
// "keep" and a token is already there. A token it writes gets a mark beside
// it: the provider's own, which a destroy removes (RemoveTokenScript); one
// it found and kept is the user's. The user's own token is never replaced:
// the same token is kept as it is (unmarked, so a destroy leaves it), and
// another one is refused (exit 3): Ray reads that file for every cluster of
// the user's on the node, and the one it serves would be locked out.
const tokenScript = `f="$HOME/.ray/auth_token"
if [ -s "$f" ] && [ ! -e "$f.terraform-provider-spark" ]; then
  new=$(cat)
  if [ "$1" = keep ] || [ "$new" = "$(cat "$f")" ]; then exit 0; fi
  echo "$f on this node is $(id -un)'s own Ray auth token (not written by terraform-provider-spark) and is not this cluster's: replacing it would lock out the Ray that uses it. Remove it, or reach this node as another SSH user." >&2
  exit 3
fi
if [ "$1" = keep ] && [ -s "$f" ]; then cat > /dev/null; exit 0; fi
mkdir -p "$HOME/.ray" && chmod 700 "$HOME/.ray" && umask 077 &&
cat > "$f.tmp" && chmod 600 "$f.tmp" && mv -f "$f.tmp" "$f" && : > "$f.terraform-provider-spark"`

// RemoveTokenScript removes the token the provider wrote, once no Ray of
// this user runs on the node any more (another cluster of the user's would
// need it): a secret file does not outlive its cluster.
const RemoveTokenScript = `f="$HOME/.ray/auth_token"
[ -e "$f.terraform-provider-spark" ] || exit 0
u=$(id -u)
if pgrep -u "$u" -x raylet >/dev/null || pgrep -u "$u" -x gcs_server >/dev/null; then exit 0; fi
rm -f -- "$f" "$f.terraform-provider-spark"`

// RemoveToken runs RemoveTokenScript on a node, where Ray runs.
func (m *Manager) RemoveToken(ctx context.Context, s Spec, n NodeSpec) error {
	_, err := m.run(ctx, n.Endpoint, "remove Ray auth token on "+n.Name, s.Runtime.Wrap([]string{"sh", "-c", RemoveTokenScript}, false))
	return err
}

func (m *Manager) ensureToken(ctx context.Context, s Spec, n NodeSpec) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return m.runStdin(ctx, n.Endpoint, "write Ray auth token", s.Runtime.Wrap(transport.Script(tokenScript, "keep"), true), []byte(hex.EncodeToString(b)))
}

func (m *Manager) putToken(ctx context.Context, s Spec, n NodeSpec, token string) error {
	if token == "" {
		return fmt.Errorf("no Ray auth token read from the head for %s", n.Name)
	}
	return m.runStdin(ctx, n.Endpoint, "write Ray auth token on "+n.Name, s.Runtime.Wrap(transport.Script(tokenScript, "replace"), true), []byte(token))
}

// tokenReadScript prints Ray's auth token where Ray runs, as Ray finds it
// (ray.TokenRead), or nothing when the node holds none (the cluster then
// runs without token authentication).
const tokenReadScript = ray.TokenRead

// ReadToken reads the cluster's token from the head ("" when it has none).
// It stays in memory, on its way to a worker.
func (m *Manager) ReadToken(ctx context.Context, s Spec) (string, error) {
	res, err := m.run(ctx, s.Head.Endpoint, "read Ray auth token", s.Runtime.Wrap([]string{"sh", "-c", tokenReadScript}, false))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// clusterToken reads the cluster's auth token from the head when token
// authentication is on: workers get it on stdin, state never sees it.
func (m *Manager) clusterToken(ctx context.Context, s Spec) (string, error) {
	if !s.AuthToken {
		return "", nil
	}
	t, err := m.ReadToken(ctx, s)
	if err == nil && t == "" {
		err = errors.New("the head has no Ray auth token (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token)")
	}
	return t, err
}

// removeToken removes the auth token the provider wrote on a node whose Ray
// it stopped; a failure is a warning naming the node and the file (nil
// when removed, or when there was nothing to remove).
func (m *Manager) removeToken(ctx context.Context, s Spec, n NodeSpec) []finding.Finding {
	if !s.AuthToken || s.Runtime.Container != nil {
		return nil // in a container, the token went with it
	}
	if err := m.RemoveToken(ctx, s, n); err != nil {
		return []finding.Finding{warning(nil, "Ray auth token left on "+n.Name,
			fmt.Sprintf("Ray is stopped on %s (%s), but its auth token (~/.ray/auth_token of the SSH user) could not be removed: %v. "+
				"Remove it by hand when no other Ray of that user runs there.", n.Name, n.Endpoint.Host, err))}
	}
	return nil
}
