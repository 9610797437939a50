// Package supervise puts a process the provider starts under the node's
// own supervisor, systemd (DGX OS's init), so that it comes back after a
// crash or a reboot with the same settings, and reads back what the
// supervisor did. It only builds text and argv and parses output: the
// callers run them over SSH.
//
// As root a unit is a system unit (/etc/systemd/system); as an ordinary
// user it is a user unit (~/.config/systemd/user), which starts at boot
// only when the user's manager lingers (`loginctl enable-linger USER`,
// once, by an administrator): the plan checks that (rule D34) before it
// installs one.
package supervise

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The restart policies, named as Docker's restart policies are (the
// docker_container resource's `restart`), which Terraform users of
// container hosts know. "unless-stopped" is not offered: systemd has no
// "stopped by hand survives a reboot" state for a unit left enabled.
const (
	No        = "no"         // not supervised: the process is started detached, as before
	OnFailure = "on-failure" // systemd Restart=on-failure: a crash, a signal, a non-zero exit
	Always    = "always"     // systemd Restart=always: any exit
)

// Policies lists the values `restart` takes, in the order the docs give.
var Policies = []string{No, OnFailure, Always}

// Supervised says the policy puts the process under systemd.
func Supervised(policy string) bool { return policy == OnFailure || policy == Always }

// Back-off: systemd 252 (Debian 12; Ubuntu 22.04 has 249) restarts after
// a fixed RestartSec (RestartSteps, a growing delay, came in 254), and
// gives up when StartLimitBurst starts fall within StartLimitIntervalSec:
// then the unit is "failed", which the plan reports as drift and the apply
// repairs. vLLM's start takes tens of seconds to minutes, so five starts
// in ten minutes is a crash loop, not a slow start.
const (
	RestartDelay  = 10 * time.Second
	startLimit    = 5
	startInterval = 10 * time.Minute
)

// Unit is one supervised process: a vLLM server or rank, whose directory
// holds what the unit runs (run, written by the launch), its environment
// file (0600, with any secret), its log and the record of its exits.
type Unit struct {
	Name        string // "spark-vllm-<key>.service"
	Description string
	Dir         string // absolute; the deployment's private directory
	Policy      string // OnFailure or Always
}

// UnitName is the unit of the vLLM server whose directory key is key
// (vllm.Server.Key, or its port).
func UnitName(key string) string { return "spark-vllm-" + key + ".service" }

// plainPath is what the unit's paths may hold: systemd unquotes and
// expands (%, $, quotes, backslashes, spaces) differently in each setting,
// and a directory the provider makes never needs any of them.
var plainPath = regexp.MustCompile(`^/[A-Za-z0-9._/@+:-]+$`)

// Validate refuses what the unit cannot hold as written.
func (u Unit) Validate() error {
	if !plainPath.MatchString(u.Dir) {
		return fmt.Errorf("the deployment's directory %q holds characters a systemd unit would read otherwise (only letters, digits and ._/@+:- are used as written); a home directory under such a path cannot hold supervised units: set restart = \"no\"", u.Dir)
	}
	if !Supervised(u.Policy) {
		return fmt.Errorf("restart %q is not a supervised policy", u.Policy)
	}
	return nil
}

// Text is the unit file. The same text for a system and a user unit:
// default.target is what either manager starts at boot. KillMode
// control-group: a crashed vLLM's children (its EngineCore holds the
// accelerator's memory) go with it before the restart. ExecStopPost
// records each exit (systemd sets SERVICE_RESULT, EXIT_CODE and
// EXIT_STATUS for it, since v232), which is what the plan reports later:
// the supervisor's own counter (NRestarts) starts again at every boot.
func (u Unit) Text() string {
	return fmt.Sprintf(`# Written by terraform-provider-spark. A change here is drift: the next
# plan reports it and the next apply writes this file again.
[Unit]
Description=%s
StartLimitIntervalSec=%d
StartLimitBurst=%d

[Service]
Type=exec
WorkingDirectory=%s
ExecStart=/bin/sh %s/run
ExecStopPost=/bin/sh %s/exited
Restart=%s
RestartSec=%d
KillMode=control-group
TimeoutStopSec=15
StandardOutput=append:%s/server.log
StandardError=append:%s/server.log

[Install]
WantedBy=default.target
`, strings.NewReplacer("%", "%%", "\n", " ").Replace(u.Description), int(startInterval.Seconds()), startLimit,
		u.Dir, u.Dir, u.Dir, u.Policy, int(RestartDelay.Seconds()), u.Dir, u.Dir)
}

// Hash is the unit file's sha256, as sha256sum prints it: what the node's
// file is compared with.
func (u Unit) Hash() string {
	h := sha256.Sum256([]byte(u.Text()))
	return hex.EncodeToString(h[:])
}

// Scope is a shell prelude that sets $sc (systemctl for this user's
// manager) and $udir (where this user's units live): the system's for
// root, else the user's own, with XDG_RUNTIME_DIR set when the SSH session
// did not set it (sshd without PAM), so systemctl finds the manager.
const Scope = `if [ "$(id -u)" = 0 ]; then sc=systemctl udir=/etc/systemd/system
else sc="systemctl --user" udir=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}
fi
`

// InstallScript writes the unit (stdin) as $1 and starts it anew, enabled
// (so it starts at boot). It prints the main process's identity
// ("pid:start", as vllm's scripts read /proc/<pid>/stat), or fails naming
// what systemd said.
const InstallScript = Scope + `unit=$1
mkdir -p -- "$udir" && cat > "$udir/$unit.new" && mv -f -- "$udir/$unit.new" "$udir/$unit" || exit 1
$sc daemon-reload || { echo "systemctl daemon-reload failed" >&2; exit 5; }
$sc reset-failed "$unit" 2>/dev/null
$sc enable "$unit" >/dev/null 2>&1 || { echo "systemctl enable $unit failed: $($sc enable "$unit" 2>&1)" >&2; exit 5; }
if ! err=$($sc restart "$unit" 2>&1); then echo "systemctl restart $unit failed: $err" >&2; exit 5; fi
pid=$($sc show -p MainPID --value "$unit")
if [ -z "$pid" ] || [ "$pid" = 0 ]; then echo "$unit did not start: $($sc show -p Result --value "$unit")" >&2; exit 5; fi
echo "$pid:$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f20)"`

// RewriteScript writes the unit (stdin) as $1 again and enables it,
// without restarting it: the repair of a unit changed or disabled by hand
// while its process runs (Verdict.InPlace). systemd reads the file at
// daemon-reload and keeps the running process; the new settings apply at
// its next start. It prints the main process's identity, as InstallScript.
const RewriteScript = Scope + `unit=$1
mkdir -p -- "$udir" && cat > "$udir/$unit.new" && mv -f -- "$udir/$unit.new" "$udir/$unit" || exit 1
$sc daemon-reload || { echo "systemctl daemon-reload failed" >&2; exit 5; }
$sc enable "$unit" >/dev/null 2>&1 || { echo "systemctl enable $unit failed: $($sc enable "$unit" 2>&1)" >&2; exit 5; }
pid=$($sc show -p MainPID --value "$unit")
if [ -z "$pid" ] || [ "$pid" = 0 ]; then echo "$unit no longer runs" >&2; exit 5; fi
echo "$pid:$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f20)"`

// RemoveScript stops the unit $1, disables it and removes its file: a
// unit already gone is removed. Its processes end with it (KillMode).
const RemoveScript = Scope + `unit=$1
[ -e "$udir/$unit" ] || [ -n "$($sc show -p LoadState --value "$unit" 2>/dev/null | grep -v not-found)" ] || exit 0
$sc disable --now "$unit" >/dev/null 2>&1
rm -f -- "$udir/$unit"
$sc daemon-reload 2>/dev/null
$sc reset-failed "$unit" 2>/dev/null
true`

// StatusScript prints what the supervisor knows of unit $1 whose
// directory is $2: systemctl's properties, the unit file's hash (none: the
// file is gone), the main process's identity, and the exits recorded.
const StatusScript = Scope + `unit=$1 dir=$2
$sc show -p ActiveState,SubState,Result,MainPID,NRestarts,UnitFileState "$unit" 2>/dev/null
echo "Hash=$(sha256sum < "$udir/$unit" 2>/dev/null | cut -d' ' -f1)"
pid=$($sc show -p MainPID --value "$unit" 2>/dev/null)
if [ -n "$pid" ] && [ "$pid" != 0 ]; then echo "Identity=$pid:$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20)"; fi
echo @@exits
tail -n 20 "$dir/exits" 2>/dev/null
true`

// ExitedScript is the unit's ExecStopPost (the file "exited" in its
// directory): one line per exit, the last 100 kept.
const ExitedScript = `#!/bin/sh
# terraform-provider-spark: systemd runs this after each exit of the unit's process.
cd "$(dirname "$0")" || exit 0
{ tail -n 99 exits 2>/dev/null; echo "$(date +%s) ${SERVICE_RESULT:-} ${EXIT_CODE:-} ${EXIT_STATUS:-}"; } > exits.new && mv -f exits.new exits
`

// Exit is one recorded exit of the unit's process.
type Exit struct {
	At     time.Time
	Result string // systemd's SERVICE_RESULT: "exit-code", "signal", "core-dump", "success", "timeout", …
	Code   string // EXIT_CODE: "exited", "killed", "dumped"
	Status string // EXIT_STATUS: the exit status, or the signal's name
}

func (e Exit) String() string {
	how := "exited with status " + e.Status
	if e.Code != "exited" {
		how = "killed by signal " + e.Status
	}
	return fmt.Sprintf("%s at %s (%s)", how, e.At.UTC().Format(time.RFC3339), e.Result)
}

// Status is what StatusScript read.
type Status struct {
	Active    string // ActiveState: active, activating, failed, inactive, …
	Sub       string // SubState: running, auto-restart, dead, …
	Result    string
	Enabled   string // UnitFileState: enabled, disabled, "" (no such unit)
	Hash      string // "" when the file is gone
	Identity  string // the main process's, "" when none
	NRestarts int    // since the unit was last started by hand (or the node booted)
	Exits     []Exit // oldest first
}

// ParseStatus reads StatusScript's output.
func ParseStatus(out string) Status {
	props, exits, _ := strings.Cut(out, "@@exits\n")
	var s Status
	for _, line := range strings.Split(props, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "ActiveState":
			s.Active = v
		case "SubState":
			s.Sub = v
		case "Result":
			s.Result = v
		case "UnitFileState":
			s.Enabled = v
		case "Hash":
			s.Hash = v
		case "Identity":
			if !strings.HasSuffix(v, ":") {
				s.Identity = v
			}
		case "NRestarts":
			s.NRestarts, _ = strconv.Atoi(v)
		}
	}
	for _, line := range strings.Split(exits, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		sec, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		e := Exit{At: time.Unix(sec, 0), Result: f[1]}
		if len(f) > 2 {
			e.Code = f[2]
		}
		if len(f) > 3 {
			e.Status = f[3]
		}
		s.Exits = append(s.Exits, e)
	}
	return s
}

// Verdict is what a plan makes of a unit's Status against the unit the
// configuration wants and the process identity in state.
type Verdict struct {
	// Drift says the unit is not what the apply left: its file changed or
	// gone, not enabled, or its process not running (failed: systemd gave
	// up; auto-restart: between two tries). The apply repairs it.
	Drift string
	// Restarted says the process runs, but is not the one the apply
	// started: the supervisor restarted it (after a crash, or at boot).
	// The plan reports it as a warning; Identity is the one running now.
	Restarted string
	Identity  string
	// InPlace says the drift is in the unit's file or its enablement only:
	// the process the apply started still runs under it, so writing the
	// unit again (RewriteScript) repairs it without a restart.
	InPlace bool
}

// Judge compares what the node's supervisor reports with the unit the
// configuration wants and the identity in state. who names the process in
// messages ("rank 1 on spark2").
func Judge(want Unit, s Status, identity, who string) Verdict {
	switch {
	case s.Hash == "":
		return Verdict{Drift: who + ": its systemd unit " + want.Name + " was removed"}
	case s.Hash != want.Hash():
		return Verdict{Drift: who + ": its systemd unit " + want.Name + " was changed by hand", InPlace: running(s, identity)}
	case s.Enabled != "enabled":
		return Verdict{Drift: fmt.Sprintf("%s: its systemd unit %s is %s, so it would not start at boot", who, want.Name, orNone(s.Enabled)),
			InPlace: running(s, identity)}
	case s.Active == "failed":
		return Verdict{Drift: fmt.Sprintf("%s: systemd gave up on %s (%s)%s", who, want.Name, s.Result, lastExit(s.Exits))}
	case s.Active != "active" || s.Identity == "":
		return Verdict{Drift: fmt.Sprintf("%s: %s is %s/%s%s", who, want.Name, orNone(s.Active), orNone(s.Sub), lastExit(s.Exits))}
	case s.Identity != identity:
		how := "the node restarted, with no exit recorded"
		if n := len(s.Exits); n > 0 {
			how = fmt.Sprintf("it exited %d time(s) since the apply, last %s", n, s.Exits[n-1])
		}
		return Verdict{Identity: s.Identity, Restarted: fmt.Sprintf("%s was restarted by systemd: %s; process %s runs now, not %s", who, how, s.Identity, orNone(identity))}
	}
	return Verdict{Identity: s.Identity}
}

// running says the unit's main process is the one the apply started
// (identity, from state), and systemd counts it active.
func running(s Status, identity string) bool {
	return identity != "" && s.Active == "active" && s.Identity == identity
}

func lastExit(exits []Exit) string {
	if len(exits) == 0 {
		return ""
	}
	return "; its last exit: " + exits[len(exits)-1].String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// HostScript prints what installing a unit needs of the node and the SSH
// user: systemd running as the init (/run/systemd/system, as
// sd_booted(3) tests), who the user is, and whether the user's manager
// lingers (logind's own record, /var/lib/systemd/linger/<user>, which
// `loginctl enable-linger` writes: without it a user's units stop when
// the user's last session ends and do not start at boot).
const HostScript = `if [ -d /run/systemd/system ]; then echo systemd=yes; else echo systemd=no; fi
echo "uid=$(id -u)"
echo "user=$(id -un)"
if [ -e "/var/lib/systemd/linger/$(id -un)" ]; then echo linger=yes; else echo linger=no; fi`

// Host is what HostScript read.
type Host struct {
	Read    bool // false: not read (an older script, or the node unread)
	Systemd bool
	Root    bool
	User    string
	Linger  bool
}

// ParseHost reads HostScript's output.
func ParseHost(out string) Host {
	h := Host{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		h.Read = true
		switch k {
		case "systemd":
			h.Systemd = v == "yes"
		case "uid":
			h.Root = v == "0"
		case "user":
			h.User = v
		case "linger":
			h.Linger = v == "yes"
		}
	}
	return h
}

// Refusal says why a unit with this policy cannot do its job on the node
// (node names it), with the fix; "" when it can, or when nothing is
// supervised.
func (h Host) Refusal(policy, node string) string {
	switch {
	case !Supervised(policy) || !h.Read:
		return ""
	case !h.Systemd:
		return fmt.Sprintf("restart = %q puts vLLM under systemd, but systemd is not the init on %s (no /run/systemd/system), so "+
			"nothing would start it again after a crash or a reboot. Run it on a node that boots systemd (DGX OS does), or set "+
			"restart = \"no\".", policy, node)
	case !h.Root && !h.Linger:
		return fmt.Sprintf("restart = %q installs a systemd user unit for %s on %s, but %s's user manager does not linger: it "+
			"stops when %s's last session ends and does not start at boot, so neither would vLLM. An administrator runs, once, "+
			"`sudo loginctl enable-linger %s` on %s; or connect as root (system units), or set restart = \"no\".",
			policy, h.User, node, h.User, h.User, h.User, node)
	}
	return ""
}
