// Package fabricprobe runs internal/fabric's throughput probe between two
// nodes over SSH: the receiver on one, the sender on the other, each given
// the same random token on its standard input.
package fabricprobe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"

	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Seconds is how long the sender sends: long enough for TCP to leave slow
// start on a 200G link, short enough for a plan.
const Seconds = 2

// Run measures from -> to, the receiver listening on toIP (to's fabric
// address): Gb/s, one TCP stream, as the bytes arrive.
func Run(ctx context.Context, pool *transport.Pool, from, to transport.Endpoint, toIP string) (float64, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return 0, err
	}
	token := []byte(hex.EncodeToString(b) + "\n")
	res, err := pool.Run(ctx, to, transport.Cmd{Step: "start the fabric probe's receiver", Argv: transport.Script(fabric.ReceiverScript, toIP), Stdin: token})
	if err != nil {
		return 0, err
	}
	port, dir, err := fabric.ParseReceiver(string(res.Stdout))
	if err != nil {
		return 0, err
	}
	_, sendErr := pool.Run(ctx, from, transport.Cmd{Step: "send the fabric probe",
		Argv: transport.Script(fabric.SenderScript, toIP, strconv.Itoa(port), strconv.Itoa(Seconds)), Stdin: token})
	// The result is read (and the receiver's directory removed) whether
	// or not the sender got through: its error is the receiver's view.
	out, err := pool.Run(ctx, to, transport.Cmd{Step: "read the fabric probe", Argv: transport.Script(fabric.ResultScript, dir)})
	if err != nil {
		return 0, err
	}
	gbps, err := fabric.ParseResult(string(out.Stdout))
	if err != nil && sendErr != nil {
		return 0, sendErr
	}
	return gbps, err
}
