// Package nodeexec decides where a command runs on a node: directly on the
// host (a Ray/vLLM install on the box), or inside a long-lived container on
// it (the DGX Spark playbook and vLLM run_cluster.sh style: `docker run -d
// --network host --gpus all …`, then `docker exec`). It only builds argv.
package nodeexec

import (
	"fmt"
	"strconv"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
)

// Label marks the containers this provider created; its value is the
// cluster's Owner. Only its own cluster's container does a cluster reuse
// or remove: two clusters on one node with one container name would run
// each other's image, and a destroy of one would take the other's Ray.
const Label = "terraform-provider-spark"

// Container is the container runtime's settings.
type Container struct {
	Image   string
	Name    string
	ShmSize string
	GPUs    string // --gpus value; "" for none
	RunArgs []string
	// Owner is the cluster on this node, as the label's value: its GCS
	// port ("gcs-6379"), which no two clusters on a head share.
	Owner string
}

// OwnerOf is the Owner of the cluster whose GCS listens on gcsPort.
func OwnerOf(gcsPort int) string { return "gcs-" + strconv.Itoa(gcsPort) }

// DefaultName is the container's name when the configuration gives none:
// one per cluster on a node.
func DefaultName(gcsPort int) string { return "ray-node-" + strconv.Itoa(gcsPort) }

// Runtime is host (Container == nil) or container.
type Runtime struct {
	RayCommand string // path of `ray` on the host or in the container; default "ray"
	Container  *Container
}

// Ray is the ray command to run.
func (r Runtime) Ray() string {
	if r.RayCommand == "" {
		return "ray"
	}
	return r.RayCommand
}

// Wrap makes argv run in the runtime: unchanged on the host, through
// `docker exec` in the container. stdin is passed through when asked.
func (r Runtime) Wrap(argv []string, stdin bool) []string {
	if r.Container == nil {
		return argv
	}
	out := []string{"docker", "exec"}
	if stdin {
		out = append(out, "-i")
	}
	return append(append(out, r.Container.Name), argv...)
}

// WrapIfRunning is Wrap for a read that has nothing to read when the
// runtime's container is not running (the node rebooted: a container
// without a restart policy stays exited, and docker exec into it fails):
// then the command prints instead, one line, and succeeds, so the caller
// reads "not running" rather than an error.
func (r Runtime) WrapIfRunning(argv []string, instead string) []string {
	if r.Container == nil {
		return argv
	}
	return append([]string{"sh", "-c", `name=$1 instead=$2; shift 2
if [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" != true ]; then printf '%s\n' "$instead"; exit 0; fi
exec docker exec "$name" "$@"`, "sh", r.Container.Name, instead}, argv...)
}

// Validate checks container settings before anything runs.
func (c Container) Validate() error {
	if c.Image == "" {
		return fmt.Errorf("runtime.container.image is empty: give the image that has Ray (and vLLM) installed")
	}
	if err := inputs.ContainerName(c.Name); err != nil {
		return fmt.Errorf("runtime.container.name: %w", err)
	}
	if c.Owner == "" {
		return fmt.Errorf("the container runtime has no owning cluster: this is a bug in the provider")
	}
	return nil
}

// EnsureArgv starts the runtime's container if it is not running (host
// network, so Ray registers the host's addresses; GPUs and shared memory as
// vLLM needs). On the host runtime there is nothing to start.
func (r Runtime) EnsureArgv() []string {
	c := r.Container
	if c == nil {
		return nil
	}
	run := []string{"docker", "run", "-d", "--name", c.Name, "--network", "host", "--ipc", "host",
		"--label", Label + "=" + c.Owner}
	if c.ShmSize != "" {
		run = append(run, "--shm-size", c.ShmSize)
	}
	if c.GPUs != "" {
		run = append(run, "--gpus", c.GPUs)
	}
	run = append(run, c.RunArgs...)
	run = append(run, c.Image, "sleep", "infinity")
	// $1 is the name, $2 the owner, the rest the docker run argv: reuse a
	// running container of this cluster, restart a stopped one, create it
	// otherwise. A container of that name another cluster owns, or that
	// this provider did not create, is refused: Ray would run with its
	// image and settings, and a stop would remove it or not as it should.
	return append([]string{"sh", "-c", `name=$1 owner=$2; shift 2
state=$(docker inspect -f '{{.State.Running}} {{index .Config.Labels "` + Label + `"}}' "$name" 2>/dev/null) || state=absent
case "$state" in
  "true $owner") exit 0 ;;
  "false $owner") exec docker start "$name" >/dev/null ;;
  absent) exec "$@" >/dev/null ;;
  "true <no value>"|"false <no value>"|"true "|"false ")
    echo "container $name exists and was not created by terraform-provider-spark (no label ` + Label + `): set runtime.container.name to another name, or remove that container" >&2; exit 1 ;;
  *) echo "container $name belongs to another cluster of terraform-provider-spark on this node (label ` + Label + `=${state#* }, this cluster is $owner): two clusters cannot share a container; set runtime.container.name to another name" >&2; exit 1 ;;
esac`, "sh", c.Name, c.Owner}, run...)
}

// ProbeArgv runs argv where Ray will run: on the host, or in the runtime's
// container — the running one, else a throwaway one from the image with the
// host's network (so the versions are the image's and the addresses the
// node's, as they will be once the container runs).
func (r Runtime) ProbeArgv(argv []string) []string {
	c := r.Container
	if c == nil {
		return argv
	}
	// The throwaway container gets the runtime's run_args too: the mounts
	// in them (a model cache, a Python environment) are part of what the
	// real container will have. $3 is how many of them follow.
	out := []string{"sh", "-c", probeScript, "sh", c.Name, c.Image, strconv.Itoa(len(c.RunArgs))}
	out = append(out, c.RunArgs...)
	return append(out, argv...)
}

// probeScript runs "$@" (n run_args, then the program and its arguments)
// in the running container $1, else in a throwaway one from image $2:
// docker run --rm --network host <run_args> --entrypoint <program> <image>
// <arguments>. POSIX sh has no arrays, so the argv is rebuilt after the
// originals (a for loop's list is expanded once) and they are shifted away.
const probeScript = `name=$1 image=$2 n=$3; shift 3
if [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ]; then shift "$n"; exec docker exec "$name" "$@"; fi
orig=$# i=0
for a in "$@"; do
  i=$((i+1))
  if [ "$i" -eq $((n+1)) ]; then set -- "$@" --entrypoint "$a" "$image"; else set -- "$@" "$a"; fi
done
shift "$orig"
exec docker run --rm --network host "$@"`

// StopArgv runs stop (which stops this cluster's Ray) where Ray runs. This
// cluster's container (the provider's label, with this cluster as its
// owner) goes, with everything in it, once stop ran in it: Ray's daemons
// stopped by a signal they handle leave the GCS's node table at once, where
// `docker rm -f`'s SIGKILL leaves the node listed alive until the GCS's
// health checks fail, beside the same node started again. A container of
// the same name that is someone else's, or another cluster's, stays: only
// stop runs in it, which takes this cluster's processes only. Absent or
// stopped, there is nothing to stop.
func (r Runtime) StopArgv(stop []string) []string {
	if r.Container == nil {
		return stop
	}
	return append([]string{"sh", "-c", `name=$1 owner=$2; shift 2
state=$(docker inspect -f '{{.State.Running}} {{index .Config.Labels "` + Label + `"}}' "$name" 2>/dev/null) || exit 0
case "$state" in
  "true $owner") docker exec "$name" "$@" >&2 || :; docker rm -f "$name" >/dev/null 2>&1; ! docker inspect "$name" >/dev/null 2>&1 ;;
  *" $owner") docker rm -f "$name" >/dev/null 2>&1; ! docker inspect "$name" >/dev/null 2>&1 ;;
  "true "*) exec docker exec "$name" "$@" ;;
esac`, "sh", r.Container.Name, r.Container.Owner}, stop...)
}
