package acctest

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// The log is written as the provider's test sink writes it (hclog), with
// the diagnostic's fields in either order, since terraform-plugin-go
// passes them from a map.
func TestWarned(t *testing.T) {
	const summary = "The two ends of the fabric have different MTUs"
	const detail = "eth1 on spark1 has MTU 1500, eth1 on spark2 has MTU 9000. TCP settles on the smaller.\n\nRule D33 (README)."
	write := func(fields ...any) []byte {
		var b bytes.Buffer
		l := hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Trace, Name: "sdk.proto"})
		l.Trace("Received request", "tf_rpc", "PlanResourceChange")
		l.Warn("Response contains warning diagnostic", fields...)
		l.Warn("Response contains warning diagnostic", "diagnostic_summary", "Another warning", "diagnostic_detail", "eth1 on spark3 has MTU 9000")
		l.Trace("Served request", "tf_rpc", "PlanResourceChange")
		return b.Bytes()
	}
	for name, log := range map[string][]byte{
		"summary first": write("diagnostic_summary", summary, "diagnostic_severity", "WARNING", "diagnostic_detail", detail),
		"detail first":  write("diagnostic_detail", detail, "diagnostic_severity", "WARNING", "diagnostic_summary", summary),
	} {
		t.Run(name, func(t *testing.T) {
			if !Warned(log, summary, "eth1 on spark2 has MTU 9000") {
				t.Errorf("the warning was not found in:\n%s", log)
			}
			if !Warned(log, summary, "eth1 on spark1 has MTU 1500", "Rule D33") {
				t.Errorf("the warning's detail, over several lines, was not found in one entry:\n%s", log)
			}
			if Warned(log, summary, "eth1 on spark3 has MTU 9000") {
				t.Errorf("another warning's detail was taken for this one's:\n%s", log)
			}
			if Warned(log, "The fabric port is down") {
				t.Errorf("a summary never logged was found:\n%s", log)
			}
		})
	}
}
