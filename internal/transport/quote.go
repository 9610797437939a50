package transport

import (
	"fmt"
	"sort"
	"strings"
)

// Quote returns s as one POSIX shell word. Values that are plainly safe are
// left bare so logged commands stay readable; everything else is wrapped in
// single quotes. A single quote inside closes the quoting, adds an escaped
// quote and opens it again (a code block here: in prose gofmt turns two
// single quotes into a curly one):
//
//	it's  ->  'it'\''s'
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafeWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func isSafeWord(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("@%+=:,./_-", r):
		default:
			return false
		}
	}
	// "=" first would read as an assignment in some contexts; "-" first is fine
	// as an argument but never as the command word, which we do not rely on.
	return s[0] != '='
}

// Join quotes every element of argv and joins them with spaces: the one way
// a command line is built in this provider. No value is ever concatenated
// into a shell string unquoted.
func Join(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Script runs a fixed shell script with positional parameters: the script
// text is the provider's own, every user value arrives as "$1", "$2", ... and
// is never spliced into the script.
func Script(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

// EnvFile renders environment variables as a file `sh` can source with
// `set -a`: every value single-quoted, keys checked.
func EnvFile(env map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if !validName(k) {
			return nil, fmt.Errorf("env key %q is not a valid environment variable name", k)
		}
		b.WriteString(k + "='" + strings.ReplaceAll(env[k], "'", `'\''`) + "'\n")
	}
	return []byte(b.String()), nil
}

func validName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, r := range k {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// PrivateDir is a shell prelude for the SSH user's own directory on a node,
// where the provider keeps what no other local user may read or replace (an
// env file with an API key, what a launch sources, start markers). $private
// names it: what the caller set, else /tmp/terraform-provider-spark-<uid>;
// "home" names the one in the user's state directory
// (~/.local/state/terraform-provider-spark), which a reboot keeps: what a
// systemd unit runs must still be there when it starts at boot, and DGX
// OS empties /tmp then. private_dir makes it 0700, or exits 1 saying why
// when it is not a real directory owned by this user (in /tmp anyone can
// make it first); owned tests the same without making it.
const PrivateDir = `case ${private:-} in
"") private=/tmp/terraform-provider-spark-$(id -u) ;;
home) private=${XDG_STATE_HOME:-$HOME/.local/state}/terraform-provider-spark ;;
esac
owned() { [ -d "$private" ] && [ ! -L "$private" ] && [ -O "$private" ]; }
private_dir() {
  umask 077
  case $private in /tmp/*) ;; *) mkdir -p -- "${private%/*}" 2>/dev/null ;; esac
  [ -e "$private" ] || [ -L "$private" ] || mkdir -m 700 -- "$private" 2>/dev/null
  if ! owned; then
    echo "$private is not a directory owned by $(id -un) (owner: $(stat -c %U -- "$private" 2>/dev/null || echo none)): another local user may have made it to read or replace what the provider keeps there (the vLLM environment file with its API key, what a launch runs). Remove it (as its owner or root) and apply again." >&2
    exit 1
  fi
  chmod 700 -- "$private"
}
`
