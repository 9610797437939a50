package acctest

import (
	"regexp"
	"strings"
)

// logEntryStart is where each entry of a TF_LOG file begins: hclog's
// timestamp at the start of a line. A value holding newlines (a
// diagnostic's detail ends with its rule's citation) is written on the
// lines after its entry's first, so an entry is read up to the next
// timestamp, not to the end of its line.
var logEntryStart = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)

// Warned reports whether the provider logged, in log (a TF_LOG=trace file
// written while the steps ran), a warning diagnostic with this summary
// whose entry holds each of details. The testing framework does not hand
// a step its plan's warnings, and terraform-plugin-go logs each
// diagnostic's fields from a map (tfprotov6/internal/diag, Log), in no
// fixed order: the summary may come before or after the detail, so the
// two are looked for within one entry rather than in sequence.
func Warned(log []byte, summary string, details ...string) bool {
	text := string(log)
	starts := logEntryStart.FindAllStringIndex(text, -1)
	for i, s := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		entry := text[s[0]:end]
		if !strings.Contains(entry, "Response contains warning diagnostic") || !strings.Contains(entry, summary) {
			continue
		}
		all := true
		for _, d := range details {
			all = all && strings.Contains(entry, d)
		}
		if all {
			return true
		}
	}
	return false
}
