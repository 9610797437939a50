package nodefacts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ListingScript prints a model directory's files with their sizes, for the
// weights rule: names and sizes only, never a hash of the bytes (a 120 GB
// model lists in milliseconds). $1 is a directory; or, with $1 empty, $2 a
// Hugging Face repository id whose snapshot in the hub cache is listed
// (as vLLM loads it with HF_HUB_OFFLINE=1): $3 the hub cache ("" = the
// node's HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub), $4
// the revision (default main; a branch or tag resolves through refs/).
// Symlinks are followed: a snapshot is links into blobs/.
const ListingScript = `dir=$1
if [ -z "$dir" ]; then
  hub=${3:-${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}}
  repo="$hub/models--$(printf '%s' "$2" | sed 's|/|--|g')"
  rev=${4:-main}
  [ -f "$repo/refs/$rev" ] && rev=$(cat "$repo/refs/$rev")
  dir="$repo/snapshots/$rev"
fi
printf '@@dir %s\n' "$dir"
if [ ! -d "$dir" ]; then echo @@missing; exit 0; fi
find -L "$dir" -type f -printf '%s\t%P\n' 2>/dev/null
# The model's config.json, for the memory estimate (memfit): at most 1 MB.
if [ -f "$dir/config.json" ]; then echo @@config; head -c 1000000 "$dir/config.json"; echo; fi
echo @@end
`

// Listing is a model directory on one node.
type Listing struct {
	Dir     string
	Missing bool             // the directory does not exist
	Files   map[string]int64 // path below Dir -> size in bytes
	Config  []byte           // config.json's content; nil when it has none
}

// ParseListing reads ListingScript's output.
func ParseListing(out string) (Listing, error) {
	var l Listing
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "@@dir ") {
		return l, fmt.Errorf("model listing output has no directory line: %q", tail(out))
	}
	l.Dir = strings.TrimPrefix(lines[0], "@@dir ")
	if len(lines) > 1 && lines[1] == "@@missing" {
		l.Missing = true
		return l, nil
	}
	if lines[len(lines)-1] != "@@end" {
		return l, fmt.Errorf("model listing of %s is truncated (no end marker)", l.Dir)
	}
	l.Files = map[string]int64{}
	body := lines[1 : len(lines)-1]
	// A listing line always has a tab (size, path): "@@config" is not a file.
	if at := slices.Index(body, "@@config"); at >= 0 {
		l.Config = []byte(strings.Join(body[at+1:], "\n"))
		body = body[:at]
	}
	for _, line := range body {
		size, name, ok := strings.Cut(line, "\t")
		n, err := strconv.ParseInt(size, 10, 64)
		if !ok || err != nil || name == "" {
			return l, fmt.Errorf("model listing of %s: unreadable line %q", l.Dir, line)
		}
		l.Files[name] = n
	}
	return l, nil
}
