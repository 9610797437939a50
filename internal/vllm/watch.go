package vllm

// WatchScript (Python, the interpreter vLLM runs on) keeps a supervised
// multi-node set whole: when one rank's process or node goes, every rank
// must start again, or none serves. vLLM's ranks do not notice by
// themselves: a headless rank whose rank 0 died waits on its message
// queue for good (measured on the lab: the old rank 1 ran on, with no
// connection left to the store, while the restarted rank 0 waited at
// torch's store for a rank 1 that never came), and across nodes systemd
// has no PartOf=. So each rank's unit runs this beside vLLM: it holds a
// TCP connection, with keepalive (a node gone is seen in about 8 s), to
// each rank it depends on, and when one closes or fails it kills vLLM
// (argv[1], SIGKILL: a signal is a failure under either restart policy),
// so systemd restarts the rank, and the set forms anew.
//
//   - a headless rank connects to rank 0's store (master_addr:master_port,
//     which holds an idle client: measured), and listens on its own
//     node_ip at the master port for rank 0's watch;
//   - rank 0 connects to each other node's watch, and acts on a loss only
//     once its API port answers (the set formed): before that, a rank of
//     the last generation may still be going away, and it connects again.
//
// argv: pid role port api_host api_port host... (role "rank0": hosts are
// the other nodes' node_ip; "headless": rank 0's master_addr, then its own
// node_ip). It is no supervisor: it only ends vLLM, and systemd does the rest.
const WatchScript = `# terraform-provider-spark: ends this vLLM rank when its set is broken, so that systemd starts it again.
import os, select, signal, socket, sys, time
me, role, port, api_host, api_port, hosts = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]

def alive():
    try:
        os.kill(me, 0)
        return True
    except OSError:
        return False

def keepalive(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 2)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 2)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    return s

def connect(host):
    while alive():
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.settimeout(None)
            return keepalive(s)
        except OSError:
            time.sleep(2)
    sys.exit(0)

def formed():
    if role != "rank0":
        return True
    try:
        socket.create_connection((api_host, int(api_port)), timeout=2).close()
        return True
    except OSError:
        return False

def broken(why):
    print("terraform-provider-spark: " + why + ": this rank set is broken, so this rank ends and systemd starts it again, to form the set anew", file=sys.stderr, flush=True)
    os.kill(me, signal.SIGKILL)
    sys.exit(0)

held = {}
listener = None
if role == "headless":
    master, mine = hosts
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((mine, port))
        listener.listen(8)
    except OSError as e:
        print("terraform-provider-spark: cannot listen on %s:%d for rank 0 watch (%s): a loss of rank 0 is still seen here" % (mine, port, e), file=sys.stderr, flush=True)
        listener = None
    held[connect(master)] = (master, "the connection to rank 0 store at %s:%d ended" % (master, port))
else:
    for h in hosts:
        held[connect(h)] = (h, "the watch connection to %s:%d ended" % (h, port))
armed = formed()
while alive():
    ready, _, _ = select.select(list(held) + ([listener] if listener else []), [], [], 5)
    armed = armed or formed()
    for s in ready:
        if s is listener:
            c, addr = listener.accept()
            held[keepalive(c)] = (None, "rank 0 watch connection from %s ended" % addr[0])
            continue
        try:
            data = s.recv(1)
        except OSError:
            data = b""
        if data:
            continue
        host, why = held.pop(s)
        s.close()
        if role == "headless" or armed:
            broken(why)
        held[connect(host)] = (host, why)
`
