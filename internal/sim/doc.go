// Package sim is a test double: simulated nodes, used by the scale bench,
// because the lab has 2 cores and cannot host 256 nodes, and by the
// resources' unit tests (internal/resources, the TestSim* tests), which
// drive a whole life of a resource without a lab.
//
// Each simulated node is an SSH server (a real handshake and public key
// authentication, golang.org/x/crypto/ssh) that runs nothing: it answers
// the commands the provider sends from a model of a healthy Ray cluster
// (addresses, GPUs, Ray 2.52.1 and vLLM 0.32.0 on Python 3.11.2, who runs
// Ray where), with an artificial delay on every round trip. The model
// knows the host runtime only (no Docker). A deployment's vllm serve is a
// record too (vllm.go): its pid and start marker files, its command line
// and environment as /proc shows them, its placement group in Ray's node
// table, and its HTTP answers (/health, /v1/models, a completion) through
// the SSH tunnel the provider opens to its port (a direct-tcpip channel). The GCS answers
// Ray's node table both ways the provider reads it: NodesScript's output, and
// its gRPC service through a tunnel to the GCS's port (gcs.go), from the
// same model, with the auth token checked. A command the model does not
// know fails loudly (exit 127, counted in Stats), so a new read the
// provider starts to send shows up in the bench instead of being answered
// with something made up.
//
// A test can make the model less healthy, as an operator's mistake or a
// fault would (vary.go): another Ray version on a node, a port held, a
// node moved off the fabric, a raylet killed, a node rebooted, a Ray
// started by hand. The nodes then answer as the real commands would print
// it, in the formats internal/nodefacts and internal/ray parse.
//
// Terraform (terraform.go) plays Terraform to the provider in-process,
// through its protocol 6 server: plan, apply (an update, or a replace as
// destroy then create), destroy and import, in Terraform's order, with
// every diagnostic kept for the test to read.
//
// The bench (bench_test.go) runs the nodes in a child process and drives
// the provider in its own process through the provider protocol, so the
// CPU time and peak RSS it reports are the provider's, not the simulated
// nodes'.
package sim
