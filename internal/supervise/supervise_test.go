package supervise

import (
	"strings"
	"testing"
	"time"
)

func TestUnitText(t *testing.T) {
	u := Unit{Name: UnitName("mp-10.0.0.1-8000"), Description: "vLLM 100% (x)\nmore", Dir: "/home/ops/.local/state/terraform-provider-spark/vllm-mp-10.0.0.1-8000", Policy: Always}
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
	text := u.Text()
	for _, want := range []string{
		"Description=vLLM 100%% (x) more\n", // a specifier escaped, one line
		"ExecStart=/bin/sh " + u.Dir + "/run\n",
		"ExecStopPost=/bin/sh " + u.Dir + "/exited\n",
		"Restart=always\n", "RestartSec=10\n", "StartLimitBurst=5\n", "StartLimitIntervalSec=600\n",
		"KillMode=control-group\n", "WantedBy=default.target\n",
		"StandardOutput=append:" + u.Dir + "/server.log\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("unit text lacks %q:\n%s", want, text)
		}
	}
	if u.Name != "spark-vllm-mp-10.0.0.1-8000.service" || len(u.Hash()) != 64 {
		t.Errorf("name %q hash %q", u.Name, u.Hash())
	}
	u.Policy = OnFailure
	if !strings.Contains(u.Text(), "Restart=on-failure\n") {
		t.Error("on-failure")
	}
	for _, bad := range []Unit{
		{Dir: "/home/o ps/x", Policy: Always}, {Dir: "/home/%u/x", Policy: Always}, {Dir: "relative", Policy: Always},
		{Dir: "/home/$USER", Policy: Always}, {Dir: "/ok", Policy: No},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: want refused", bad)
		}
	}
}

const statusOut = `ActiveState=active
SubState=running
Result=success
MainPID=4242
NRestarts=2
UnitFileState=enabled
Hash=%s
Identity=4242:98765
@@exits
1765000000 signal killed KILL
1765000100 exit-code exited 1
`

func TestJudge(t *testing.T) {
	u := Unit{Name: "spark-vllm-k.service", Dir: "/home/ops/d", Policy: Always}
	ok := strings.Replace(statusOut, "%s", u.Hash(), 1)
	s := ParseStatus(ok)
	if s.Active != "active" || s.Identity != "4242:98765" || s.NRestarts != 2 || len(s.Exits) != 2 ||
		s.Exits[0].Status != "KILL" || s.Exits[1].Code != "exited" || !s.Exits[0].At.Equal(time.Unix(1765000000, 0)) {
		t.Fatalf("parsed %+v", s)
	}
	cases := []struct {
		name, out, identity string
		drift, restarted    string
		inPlace             bool
	}{
		{"the process the apply started", ok, "4242:98765", "", "", false},
		{"restarted after two exits", ok, "100:1", "", "was restarted by systemd: it exited 2 time(s) since the apply, last exited with status 1 at 2025-12-06T05:48:20Z (exit-code); process 4242:98765 runs now, not 100:1", false},
		{"restarted at boot", strings.Replace(strings.SplitAfter(ok, "@@exits\n")[0], "", "", 1), "100:1", "", "the node restarted, with no exit recorded", false},
		// The process the apply started still runs: the unit is written again, nothing restarts.
		{"file edited", strings.Replace(ok, u.Hash(), "beef", 1), "4242:98765", "was changed by hand", "", true},
		{"disabled", strings.Replace(ok, "UnitFileState=enabled", "UnitFileState=disabled", 1), "4242:98765", "is disabled, so it would not start at boot", "", true},
		// Edited, and systemd has restarted it since: the set restarts.
		{"file edited, process restarted", strings.Replace(ok, u.Hash(), "beef", 1), "100:1", "was changed by hand", "", false},
		{"file removed", strings.Replace(ok, "Hash="+u.Hash(), "Hash=", 1), "4242:98765", "was removed", "", false},
		{"gave up", strings.NewReplacer("ActiveState=active", "ActiveState=failed", "Result=success", "Result=start-limit-hit", "Identity=4242:98765\n", "").Replace(ok), "4242:98765",
			"systemd gave up on spark-vllm-k.service (start-limit-hit); its last exit: exited with status 1", "", false},
		{"between two tries", strings.NewReplacer("ActiveState=active", "ActiveState=activating", "SubState=running", "SubState=auto-restart", "Identity=4242:98765\n", "").Replace(ok), "4242:98765",
			"is activating/auto-restart", "", false},
	}
	for _, c := range cases {
		v := Judge(u, ParseStatus(c.out), c.identity, "rank 0 on spark1")
		if c.drift == "" && v.Drift != "" || !strings.Contains(v.Drift, c.drift) {
			t.Errorf("%s: drift %q, want %q", c.name, v.Drift, c.drift)
		}
		if c.restarted == "" && v.Restarted != "" || !strings.Contains(v.Restarted, c.restarted) {
			t.Errorf("%s: restarted %q, want %q", c.name, v.Restarted, c.restarted)
		}
		if v.InPlace != c.inPlace {
			t.Errorf("%s: in place %v, want %v", c.name, v.InPlace, c.inPlace)
		}
		if c.drift == "" && v.Identity != "4242:98765" {
			t.Errorf("%s: identity %q", c.name, v.Identity)
		}
	}
}

func TestHostRefusal(t *testing.T) {
	h := ParseHost("systemd=yes\nuid=1001\nuser=ops2\nlinger=no\n")
	if got := h.Refusal(Always, "spark2"); !strings.Contains(got, "sudo loginctl enable-linger ops2` on spark2") {
		t.Errorf("no linger: %q", got)
	}
	if got := h.Refusal(No, "spark2"); got != "" {
		t.Errorf("restart no is never refused: %q", got)
	}
	if got := ParseHost("systemd=yes\nuid=1000\nuser=ops\nlinger=yes\n").Refusal(OnFailure, "spark1"); got != "" {
		t.Errorf("a lingering user: %q", got)
	}
	if got := ParseHost("systemd=yes\nuid=0\nuser=root\nlinger=no\n").Refusal(Always, "spark1"); got != "" {
		t.Errorf("root needs no linger: %q", got)
	}
	if got := ParseHost("systemd=no\nuid=0\nuser=root\nlinger=no\n").Refusal(Always, "spark1"); !strings.Contains(got, "systemd is not the init on spark1") {
		t.Errorf("no systemd: %q", got)
	}
	if got := ParseHost("").Refusal(Always, "spark1"); got != "" {
		t.Errorf("unread is not a refusal: %q", got)
	}
}
