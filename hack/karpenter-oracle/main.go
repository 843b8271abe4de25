// karpenter-oracle runs Karpenter's own NodeOverlay controller over directories of YAML and prints
// what Karpenter decides: each overlay's condition and, per NodePool, the instance types whose
// offerings or capacity the overlays changed. See README.md.
//
//	karpenter-oracle -catalog catalog.json DIR...           one JSON document for all DIRs
//	karpenter-oracle -catalog catalog.json -bench 5 DIR...  timings of full passes instead
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type dirResult struct {
	Dir string `json:"dir"`
	// True when the input held no NodePool and the implicit "default" one was assumed.
	ImplicitDefault bool                             `json:"implicitDefaultNodePool"`
	Overlays        map[string]overlayResult         `json:"overlays,omitempty"`
	NodePools       map[string]map[string]typeResult `json:"nodepools,omitempty"`
	DRA             []draResult                      `json:"dynamicResources,omitempty"`
	PassSeconds     []float64                        `json:"passSeconds,omitempty"`
	PassCPUSeconds  []float64                        `json:"passCpuSeconds,omitempty"`
	Counts          map[string]int                   `json:"counts,omitempty"`
	Error           string                           `json:"error,omitempty"`
}

type output struct {
	Karpenter string      `json:"karpenter"`
	Results   []dirResult `json:"results"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("karpenter-oracle", flag.ContinueOnError)
	flags.SetOutput(stderr)
	catalogPath := flags.String("catalog", "", "JSON catalog (simulation/catalog.py format) for directories without InstanceType documents")
	bench := flags.Int("bench", 0, "time this many full reconcile passes per directory instead of reporting effects")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	// controller-runtime warns on stderr when no logger is set; the controller logs nothing we need.
	ctrllog.SetLogger(logr.Discard())

	var catalog []typeSpec
	if *catalogPath != "" {
		var err error
		if catalog, err = readJSONCatalog(*catalogPath); err != nil {
			fmt.Fprintf(stderr, "karpenter-oracle: %v\n", err)
			return 2
		}
	}
	out := output{Karpenter: karpenterVersion(), Results: []dirResult{}}
	for _, dir := range flags.Args() {
		out.Results = append(out.Results, runDir(dir, catalog, *bench))
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(stderr, "karpenter-oracle: %v\n", err)
		return 1
	}
	return 0
}

func runDir(dir string, catalog []typeSpec, bench int) dirResult {
	res := dirResult{Dir: dir}
	in, err := readInput(dir, catalog)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.ImplicitDefault = in.implicitDefault
	c := newCluster(in)
	if bench > 0 {
		res.Counts = map[string]int{"overlays": len(in.overlays), "nodepools": len(in.nodePools), "instanceTypes": len(in.instanceTypes)}
		for i := 0; i < bench; i++ {
			took, err := c.reconcile()
			if err != nil {
				res.Error = err.Error()
				return res
			}
			res.PassSeconds = append(res.PassSeconds, took.wall.Seconds())
			res.PassCPUSeconds = append(res.PassCPUSeconds, took.cpu.Seconds())
		}
		return res
	}
	if _, err := c.reconcile(); err != nil {
		res.Error = err.Error()
		return res
	}
	if res.Overlays, err = c.statuses(); err != nil {
		res.Error = err.Error()
		return res
	}
	if res.NodePools, err = c.effects(in.nodePools); err != nil {
		res.Error = err.Error()
		return res
	}
	if res.DRA, err = dynamicResources(in); err != nil {
		res.Error = err.Error()
	}
	return res
}

func karpenterVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/karpenter" {
				return dep.Version
			}
		}
	}
	return "unknown"
}
