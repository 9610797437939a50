// Package inputs holds the config-time checks of attribute values: what
// Terraform can refuse at validate, before any node is read. Each check is
// pure (value in, error out) and its error says what is wrong with the value
// and how to fix it; the framework wrappers in providerdata add the attribute
// path. Checks that need the nodes live in preflight.
package inputs

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"
)

// shellName is a POSIX shell variable name (IEEE Std 1003.1, XBD 3.235
// "Name"). Anything else cannot be exported by a shell, and a key such as
// "-S..." would be read by GNU env as an option.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvKey checks a key of an `env` map.
func EnvKey(k string) error {
	if !shellName.MatchString(k) {
		return fmt.Errorf("key %q is not an environment variable name: use letters, digits and _, not starting with a digit", k)
	}
	return nil
}

// secretName matches the names that hold credentials by convention (HF_TOKEN,
// WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, ...); TOKENIZERS_* or
// *_KEY_PATH are not among them.
var secretName = regexp.MustCompile(`(?i)(^|_)(TOKEN|API_?KEY|KEY|SECRET|SECRET_KEY|SECRET_ACCESS_KEY|PASSWORD|PASSWD|PRIVATE_KEY|CREDENTIALS?)$`)

// PlainEnvKey checks a key of a plain (stored, shown) `env` map: a name that
// holds a credential belongs in secret_env_wo, which never reaches state.
func PlainEnvKey(k string) error {
	if err := EnvKey(k); err != nil {
		return err
	}
	switch {
	case strings.EqualFold(k, "VLLM_API_KEY"):
		return fmt.Errorf("%q is vLLM's API key, and env is stored in state and shown in plans: give it in api_key_wo "+
			"(write-only) or api_key_file (a file on the head)", k)
	case !secretName.MatchString(k):
		return nil
	}
	fix := ""
	if strings.HasPrefix(strings.ToUpper(k), "HF_") || strings.HasPrefix(strings.ToUpper(k), "HUGGING") {
		// huggingface_hub reads $HF_HOME/token when HF_TOKEN is unset.
		fix = ", or keep it on the node (`hf auth login` writes the token file vLLM reads)"
	}
	return fmt.Errorf("%q names a secret, and env is stored in state and shown in plans: give it in secret_env_wo "+
		"(write-only, Terraform/OpenTofu 1.11+: it reaches only a 0600 file on the nodes)%s", k, fix)
}

// EnvValue checks a value of an `env` map: it is written to a file of
// KEY=value lines and exported by a shell, where NUL cannot be carried.
func EnvValue(k, v string) error {
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("value of %q holds a NUL byte, which no environment variable can carry: remove it", k)
	}
	return nil
}

// workerName keeps a worker's map key usable as a file-name and log label
// on the nodes, and unambiguous in messages ("workers[spark2]").
var workerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// WorkerName checks a key of the cluster's `workers` map.
func WorkerName(k string) error {
	if strings.EqualFold(k, "head") {
		return fmt.Errorf("worker name %q is the name the provider gives the head node: call the worker something else, e.g. \"spark2\"", k)
	}
	if !workerName.MatchString(k) {
		return fmt.Errorf("worker name %q must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. \"spark2\"", k)
	}
	return nil
}

// NotBlank checks a value that must say something: an empty or
// whitespace-only string is never a user, a model or a name.
func NotBlank(what string) func(string) error {
	return func(v string) error {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%q is empty: give %s, or leave the attribute out for its default", v, what)
		}
		return nil
	}
}

// Path checks a path or command name that the provider passes to a remote
// shell as one quoted word: a newline or NUL there cannot be meant, and a
// leading '-' would be read as an option by the command it is given to.
func Path(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%q is empty: give a path such as \"/opt/ray/bin/ray\", or leave the attribute out for its default", v)
	case strings.ContainsAny(v, "\x00\n\r"):
		return fmt.Errorf("%q holds a line break or NUL: give the path on one line", v)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%q starts with '-', which the command reads as an option: give a path such as \"./%s\"", v, v)
	}
	return nil
}

// NodeIP checks a node_ip value (rule D4): a literal IP
// Ray will keep. Ray silently replaces 127.0.0.1 and localhost with its own
// detection, and registers IPs only, never hostnames.
func NodeIP(v string) error {
	if strings.EqualFold(v, "localhost") {
		return fmt.Errorf("node_ip = %q: Ray silently replaces localhost with the address it detects itself, so the node would register another address. Give the node's fabric or external IP, or leave node_ip unset to let Ray detect it", v)
	}
	ip, err := netip.ParseAddr(v)
	if err != nil {
		return fmt.Errorf("node_ip = %q is not an IP address: Ray registers nodes by IP only (node:<ip>), so a hostname can never match vLLM's placement label. Give the literal IP, e.g. \"192.168.200.12\"", v)
	}
	if ip.IsLoopback() {
		return fmt.Errorf("node_ip = %q is a loopback address: Ray silently replaces it with the address it detects itself. Give the node's fabric or external IP", v)
	}
	if ip.IsUnspecified() {
		return fmt.Errorf("node_ip = %q is the unspecified address: a node must register an address the others can reach", v)
	}
	return nil
}

// HostIP checks a host_ip value, or VLLM_HOST_IP in env (rule D2): vLLM
// uses any string unvalidated, so a hostname or a stray character becomes a
// node:<value> label no Ray node can ever carry (D2).
func HostIP(v string) error {
	ip, err := netip.ParseAddr(v)
	if err != nil {
		return fmt.Errorf("host_ip = %q is not an IP address: vLLM pins its placement group to node:%s, and Ray labels "+
			"nodes by IP only, so no node could ever match. Give the literal IP Ray registered for the head, e.g. \"10.1.230.180\"", v, v)
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return fmt.Errorf("host_ip = %q: Ray never registers a node as %s, so vLLM's placement group could not be placed. "+
			"Give the IP Ray registered for the head", v, v)
	}
	return nil
}

// hfRepository is a Hugging Face repository id: <org>/<name>, as the Hub's
// own validate_repo_id accepts it (letters, digits, "-", "_", "."; no "--"
// or ".." inside; at most 96 characters).
var hfRepository = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// HFRepository checks a Hugging Face repository id.
func HFRepository(v string) error {
	if !hfRepository.MatchString(v) || len(v) > 96 || strings.Contains(v, "--") || strings.Contains(v, "..") {
		return fmt.Errorf("%q is not a Hugging Face repository id: write it as <org>/<name>, e.g. \"Qwen/Qwen2.5-7B-Instruct\"", v)
	}
	return nil
}

// Address checks an address a server binds to: a literal IP. Ray's
// dashboard passes --dashboard-host to its HTTP server's bind (a name would
// be resolved on the node, to whichever address the resolver prefers);
// "localhost" is accepted as the one name every node resolves the same way.
func Address(v string) error {
	if v == "localhost" {
		return nil
	}
	if _, err := netip.ParseAddr(v); err != nil {
		return fmt.Errorf("%q is not an IP address: give a literal address, e.g. \"127.0.0.1\" (this node only) or \"0.0.0.0\" (every interface)", v)
	}
	return nil
}

// HostPort checks an `<ip>:<port>` address such as a Ray GCS address.
func HostPort(v string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(v)
	if err != nil || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%q is not <ip>:<port>: give the head's registered address and GCS port, e.g. \"192.168.200.11:6379\" "+
			"(usually spark_ray_cluster.<name>.head_address)", v)
	}
	return ap, nil
}

// shmSize is a safe subset of what docker reads for --shm-size
// (github.com/docker/go-units size.go, v0.5.0, RAMInBytes -> parseSize: a
// decimal number, optional space, then an optional unit of k/m/g/t/p with
// optional "i" and "b", or a bare "b"). The subset is what docker documents;
// anything outside it would only fail later, on the node, as "invalid size".
var shmSize = regexp.MustCompile(`^[0-9]+(\.[0-9]+)? ?([kKmMgGtTpP]([iI]?[bB])?|[bB])?$`)

// ShmSize checks the container runtime's shm_size.
func ShmSize(v string) error {
	if !shmSize.MatchString(v) {
		return fmt.Errorf("%q is not a size docker reads: write it like \"10g\", \"512m\" or \"16GiB\"", v)
	}
	return nil
}

// containerName is docker's own rule for names: moby daemon/names,
// RestrictedNameChars `[a-zA-Z0-9][a-zA-Z0-9_.-]`.
var containerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// ContainerName checks the container runtime's name.
func ContainerName(v string) error {
	if !containerName.MatchString(v) {
		return fmt.Errorf("%q is not a container name docker accepts: use letters, digits, '_', '.' and '-', starting with a letter or digit, e.g. \"ray-node\"", v)
	}
	return nil
}

// InterfaceName checks a network interface name as the Linux kernel takes
// one (dev_valid_name, net/core/dev.c): 1 to 15 bytes, not "." or "..", no
// '/', ':' or whitespace. A comma or a leading '^' or '=' is NCCL's list
// syntax, not a name: one node has one fabric port here.
func InterfaceName(v string) error {
	switch {
	case v == "" || len(v) > 15:
		return fmt.Errorf("%q is not an interface name: Linux names are 1 to 15 characters, e.g. \"enp1s0f1np1\" (see `ip -br link` on the node)", v)
	case v == "." || v == "..", strings.ContainsAny(v, "/: \t\n\r\x00"):
		return fmt.Errorf("%q is not an interface name Linux accepts (no '/', ':' or whitespace): name the port as `ip -br link` shows it", v)
	case strings.ContainsAny(v, ",^="):
		return fmt.Errorf("%q is a list or an NCCL pattern, not one interface: give this node's one fabric port, e.g. \"enp1s0f1np1\"", v)
	}
	return nil
}

// Image checks a container image reference. The full grammar is docker's
// to judge when it pulls; what is refused here is what would otherwise be
// read as something else: an empty word, spaces, or a leading '-' (an option
// of `docker run`).
func Image(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%q is empty: give the image with Ray and vLLM, e.g. \"nvcr.io/nvidia/vllm:25.09-py3\"", v)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%q starts with '-', which docker run reads as an option: give an image reference", v)
	case strings.ContainsAny(v, " \t\n\r\x00"):
		return fmt.Errorf("%q holds whitespace, which no image reference has: give one reference such as \"repo/image:tag\"", v)
	}
	return nil
}

// GPUs checks the container runtime's gpus (docker run --gpus): "" for
// none, "all", a count, or a device request such as "device=0,1".
func GPUs(v string) error {
	if strings.HasPrefix(v, "-") || strings.ContainsAny(v, " \t\n\r\x00") {
		return fmt.Errorf("%q is not a --gpus value: give \"all\", a count such as \"1\", \"device=0,1\", or \"\" for none", v)
	}
	return nil
}

// APIKey checks an API key. vLLM adds its bearer-token middleware only for
// non-empty keys (vllm/entrypoints/serve/middleware/register.py, v0.32.0:
// `tokens = [key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]`,
// then `if tokens:`), so an empty key serves without authentication while
// the configuration says a key is set. The message never echoes the key.
func APIKey(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("the key is empty, and vLLM serves without authentication when its key is empty: give a non-empty key, or leave the attribute out")
	case strings.ContainsAny(v, "\x00\n\r"):
		return fmt.Errorf("the key holds a line break or NUL, which an HTTP Authorization header cannot carry: give the key on one line")
	}
	return nil
}

// maxResourceQuantity is Ray's ceiling for one resource on one node
// (ray/_private/ray_constants.py, Ray 2.52.1: MAX_RESOURCE_QUANTITY = 100e12).
const maxResourceQuantity = 100e12

// ResourceQuantity checks a custom Ray resource's quantity as `ray start
// --resources` does (ray/_private/resource_and_label_spec.py, Ray 2.52.1,
// ResourceAndLabelSpec.to_resource_dict: "Resource
// quantities must all be whole numbers", "must be nonnegative", "must be at
// most" MAX_RESOURCE_QUANTITY). Zero is allowed.
func ResourceQuantity(name string, q float64) error {
	switch {
	case math.IsNaN(q) || math.IsInf(q, 0) || q < 0:
		return fmt.Errorf("resource %q = %v: Ray refuses negative quantities (\"Resource quantities must be nonnegative\"): give a whole number of at least 0, e.g. 1", name, q)
	case q != math.Trunc(q):
		return fmt.Errorf("resource %q = %v: ray start refuses fractions (\"Resource quantities must all be whole numbers\"): give a whole number, e.g. %v", name, q, math.Max(1, math.Round(q)))
	case q > maxResourceQuantity:
		return fmt.Errorf("resource %q = %v: Ray's largest quantity is %v: give a smaller number", name, q, maxResourceQuantity)
	}
	return nil
}

// rayOwnResources are the resources Ray sets from its own flags
// (ray/_private/ray_constants.py, Ray 2.52.1: DEFAULT_RESOURCES; refused in
// --resources by ray/_private/parameter.py, RayParams._check_usage: "cannot
// be a custom resource because it is one of the default resources").
var rayOwnResources = map[string]string{
	"CPU":                 "its --num-cpus (the node's CPU count)",
	"GPU":                 "num_gpus",
	"memory":              "its --memory (the node's memory)",
	"object_store_memory": "its --object-store-memory",
}

// ResourceName checks a custom Ray resource's name.
func ResourceName(name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("a resource has an empty name: give each custom resource a name, e.g. \"fabric\"")
	}
	if how, ok := rayOwnResources[name]; ok {
		return fmt.Errorf("resource %q is one of Ray's own, which ray start refuses in --resources: set it with %s, and name custom resources otherwise", name, how)
	}
	// ray/_private/resource_and_label_spec.py (Ray 2.52.1, resolve): the
	// head's own resource (HEAD_NODE_RESOURCE_NAME) may not be set by hand.
	if name == "node:__internal_head__" {
		return fmt.Errorf("resource %q is the one Ray gives the head itself: leave it out", name)
	}
	// node:<ip> is the label Ray gives every node for its address, and what
	// vLLM pins its placement groups to (bundle 0 of the legacy executor,
	// the data-parallel master): one given by hand can satisfy a pin on the
	// wrong node, or misdirect it.
	if strings.HasPrefix(name, "node:") {
		return fmt.Errorf("resource %q has the form of the label Ray gives each node for its address (node:<ip>), which vLLM pins its "+
			"placement groups to: given by hand it can send vLLM's workers to the wrong node. Set node_ip to change the address a node "+
			"registers, and name custom resources otherwise", name)
	}
	return nil
}

// labelName is Ray's rule for a label key's name and for a value
// (ray/_private/label_utils.py, Ray 2.52.1: LABEL_REGEX, at most 63
// characters, alphanumeric at both ends, '-', '_' and '.' inside).
var labelName = regexp.MustCompile(`^` + labelPart + `$`)

// labelPrefix is the optional prefix of a label key: dot-separated parts
// of labelName's form (ray/_private/label_utils.py, Ray 2.52.1:
// LABEL_PREFIX_REGEX, at most 253 characters).
var labelPrefix = regexp.MustCompile(`^(` + labelPart + `?(\.` + labelPart + `?)*)$`)

const labelPart = `([a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?)`

// LabelKey checks a node label's key as Ray does (ray/_private/label_utils.py,
// Ray 2.52.1: validate_label_key, the prefix being what precedes the last
// '/'; validate_node_labels refuses keys starting with "ray.io/", Ray's own).
func LabelKey(k string) error {
	name := k
	if i := strings.LastIndex(k, "/"); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if len(prefix) > 253 || !labelPrefix.MatchString(prefix) {
			return fmt.Errorf("label key %q: its prefix %q is not one Ray accepts (dot-separated letters, digits, '-', '_', at most 253 characters): write it like \"lab.example/rack\"", k, prefix)
		}
	}
	if strings.HasPrefix(k, "ray.io/") {
		return fmt.Errorf("label key %q: the ray.io/ prefix is reserved for the labels Ray sets itself: use a prefix of your own, e.g. \"lab.example/%s\"", k, name)
	}
	if !labelName.MatchString(name) {
		return fmt.Errorf("label key %q is not one Ray accepts: 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, after an optional \"prefix/\"", k)
	}
	return nil
}

// LabelValue checks a node label's value as Ray does (validate_label_value,
// same file and release): empty, or the same form as a key's name.
func LabelValue(k, v string) error {
	if v != "" && !labelName.MatchString(v) {
		return fmt.Errorf("label %q = %q is not a value Ray accepts: empty, or 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k, v)
	}
	return nil
}

// Model checks the model a deployment serves: it follows `vllm serve` in
// argv, where a leading "-" makes it a flag ("--port=9000" would set the
// port and leave no model).
func Model(v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("model is empty: give a model name or path (a Hugging Face name \"org/name\", or a directory on the nodes)")
	}
	if strings.HasPrefix(v, "-") {
		return fmt.Errorf("model = %q starts with \"-\": vllm serve would read it as a flag, not a model. Give a Hugging Face name or a path "+
			"(\"./%s\" for a directory so named); flags go in extra_args", v, v)
	}
	return nil
}

// ServePort checks vLLM's HTTP port against the cluster it joins: vLLM
// binds every interface of the head (--host 0.0.0.0), so the head's GCS
// port is taken and the server would exit on "address already in use".
func ServePort(port int64, rayAddress string) error {
	// An address that does not parse is HostPort's to report.
	if ap, err := netip.ParseAddrPort(rayAddress); err == nil && int64(ap.Port()) == port {
		return fmt.Errorf("port = %d is the GCS port of the Ray head this server joins (ray_address = %q), and vLLM binds every "+
			"interface of the head: choose another port, e.g. 8000", port, rayAddress)
	}
	return nil
}

// TargetAddress checks the address a spark_model target receives a copy on:
// a literal IP the receiver binds, and one that names a single interface.
// 0.0.0.0 or :: would bind every interface (the copy's port open on all of
// them). Loopback is left to the plan (D22): it serves a target on the
// source's own node, and no other.
func TargetAddress(v string) error {
	ip, err := netip.ParseAddr(v)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not an IP address: give the target's literal IP the copy arrives on, e.g. its fabric address \"192.168.200.13\"", v)
	case ip.IsUnspecified():
		return fmt.Errorf("address = %q would make the target listen on every interface: give the one address the copy arrives on, e.g. its fabric address", v)
	}
	return nil
}
