package fabric

import (
	"fmt"
	"strconv"
	"strings"
)

// The throughput probe: one TCP stream from one node to another over the
// fabric addresses, for a few seconds, timed where the bytes arrive. It
// runs in three SSH round trips: ReceiverScript on the receiving node
// (listens on its fabric address, on a port the kernel picks, in the
// background, and says where), SenderScript on the sending node, then
// ResultScript on the receiving node. Both ends hold a random token, given
// on standard input (never argv), and the receiver counts nothing from a
// sender that does not send it first. Every wait is bounded; the receiver
// gives up after 10 s without a sender and 20 s in all, and leaves
// nothing behind once its result is read.
//
// It measures TCP in one stream, as Python moves it: a floor that shows a
// link running at a fraction of its rate (a 200G port carrying 13 Gb/s),
// not the RDMA rate NCCL reaches on the same port.

// ReceiverScript: $1 the address to listen on; the token on stdin. Prints
// "@@probe <port> <directory>".
const ReceiverScript = `umask 077
d=$(mktemp -d) || exit 1
IFS= read -r tok
printf '%s' "$tok" > "$d/token"
setsid python3 -c '
import os, socket, struct, sys, time
ip, d = sys.argv[1], sys.argv[2]
tok = open(d + "/token", "rb").read()
os.remove(d + "/token")
res = "error no sender within 10 s"
try:
    s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
    s.bind((ip, 0))
    s.listen(1)
    s.settimeout(10)
    open(d + "/port.tmp", "w").write(str(s.getsockname()[1]))
    os.rename(d + "/port.tmp", d + "/port")
    c, _ = s.accept()
    # Blocking, with a receive timeout in the kernel: the way a plain copy
    # reads (a Python timeout would poll before every read).
    c.settimeout(None)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
    deadline = time.time() + 20
    got = b""
    while len(got) < len(tok):
        b = c.recv(len(tok) - len(got))
        if not b:
            break
        got += b
    if got != tok:
        res = "error a sender without the token"
    else:
        n, t0 = 0, None
        buf = memoryview(bytearray(4 << 20))
        while time.time() < deadline:
            k = c.recv_into(buf)
            if not k:
                break
            if t0 is None:
                t0 = time.time()
            n += k
        res = "ok %d %.6f" % (n, time.time() - t0) if t0 is not None and n else "error no data"
    c.close()
except Exception as e:
    res = "error %s" % e
open(d + "/result.tmp", "w").write(res)
os.rename(d + "/result.tmp", d + "/result")
' "$1" "$d" >/dev/null 2>&1 </dev/null &
i=0
while [ ! -s "$d/port" ] && [ ! -s "$d/result" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
echo "@@probe $(cat "$d/port" 2>/dev/null || echo 0) $d"
`

// SenderScript: $1 the receiver's address, $2 its port, $3 seconds to
// send; the token on stdin. Waits for the receiver to close (every byte
// counted) before it returns.
const SenderScript = `IFS= read -r tok
PROBE_TOKEN=$tok exec python3 -c '
import os, socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
# Blocking sends, bounded by a send timeout in the kernel, as a plain copy
# sends: with a Python timeout every sendall polls first and returns
# partial writes, which read 10 to 35 % faster than a plain copy on the lab.
s.settimeout(None)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
s.sendall(os.environ["PROBE_TOKEN"].encode())
# A buffer whose pages are written (bytearray zeroes its memory), as a
# payload is: bytes(n) maps the kernel zero page, which every send then
# copies from the CPU cache, and read 25 % over a plain copy on the lab.
buf = memoryview(bytearray(4 << 20))
end = time.time() + float(sys.argv[3])
while time.time() < end:
    s.sendall(buf)
s.shutdown(socket.SHUT_WR)
s.settimeout(15)
s.recv(1)
s.close()
' "$1" "$2" "$3"
`

// ResultScript: $1 the receiver's directory. Waits (bounded) for its
// result, prints "@@result <result>", and removes the directory.
const ResultScript = `d=$1
case $d in /*) ;; *) echo "@@result error not a probe directory"; exit 0 ;; esac
i=0
while [ ! -s "$d/result" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done
echo "@@result $(cat "$d/result" 2>/dev/null || echo error no result)"
rm -rf "$d"
`

// ParseReceiver reads ReceiverScript's output.
func ParseReceiver(out string) (port int, dir string, err error) {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "@@probe "); ok {
			p, d, _ := strings.Cut(rest, " ")
			port, err = strconv.Atoi(p)
			if err != nil || port <= 0 || !strings.HasPrefix(d, "/") {
				return 0, d, fmt.Errorf("the probe's receiver did not start (port %q)", p)
			}
			return port, d, nil
		}
	}
	return 0, "", fmt.Errorf("the probe's receiver printed nothing: %q", out)
}

// ParseResult reads ResultScript's output: the throughput in Gb/s.
func ParseResult(out string) (float64, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "@@result ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 3 && f[0] == "ok" {
			n, errN := strconv.ParseFloat(f[1], 64)
			secs, errS := strconv.ParseFloat(f[2], 64)
			if errN == nil && errS == nil && secs > 0 {
				return n * 8 / secs / 1e9, nil
			}
		}
		return 0, fmt.Errorf("the probe failed: %s", strings.TrimPrefix(rest, "error "))
	}
	return 0, fmt.Errorf("the probe's result is missing: %q", out)
}

// BelowFloor is the refusal of a measured link under the operator's floor.
func BelowFloor(from, to End, gbps, floor float64) Problem {
	return Problem{Node: to.Node, Summary: "The fabric carries less than its floor",
		Detail: fmt.Sprintf("%s -> %s over %s -> %s carried %.1f Gb/s (one TCP stream, for 2 s), below fabric_probe.min_gbps = %g. "+
			"Check the link on both ends (speed and cabling: `ethtool`; the MTU of both ends and of any switch between them), "+
			"or lower min_gbps if that rate is what the link gives.", from.Node, to.Node, from.IP, to.IP, gbps, floor)}
}
