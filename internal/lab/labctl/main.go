// Command labctl brings the containerized Spark lab up or down:
//
//	go run ./internal/lab/labctl up [-nodes 2] [-lanes 1] [-dir .lab]
//	go run ./internal/lab/labctl down
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: labctl up|down|regen-host-key [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	dir := fs.String("dir", ".lab", "directory for lab.json, the SSH key and known_hosts")
	nodes := fs.Int("nodes", 2, "number of nodes")
	lanes := fs.Int("lanes", 1, "also write lane-1.json..lane-N.json, each with nodes/lanes of the nodes (CI's parallel test lanes)")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("[lab %5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	var err error
	switch cmd {
	case "up":
		_, err = lab.Up(ctx, lab.Options{Dir: *dir, Nodes: *nodes, Lanes: *lanes, Log: logf})
	case "down":
		err = lab.Down(ctx, logf)
	case "regen-host-key":
		var key string
		key, err = lab.RegenerateHostKey(ctx, *dir, fs.Arg(0))
		logf("new host key: %s", key)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}
