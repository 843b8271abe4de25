package main

import (
	"context"
	"fmt"
	"math"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	cpfake "sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator/options"
)

// cluster is one input set wired the way Karpenter's operator wires the NodeOverlay controller:
// a kube client holding the objects, a cloud provider returning the catalog, the controller
// writing into the InstanceTypeStore, and the store-decorated cloud provider that the
// scheduler and disruption read instance types from.
type cluster struct {
	ctx        context.Context
	kubeClient client.Client
	controller *nodeoverlay.Controller
	provider   cloudprovider.CloudProvider
	base       []*cloudprovider.InstanceType
}

func newCluster(in *input) *cluster {
	objects := make([]client.Object, 0, len(in.overlays)+len(in.nodePools))
	for i := range in.overlays {
		objects = append(objects, in.overlays[i].DeepCopy())
	}
	for i := range in.nodePools {
		objects = append(objects, in.nodePools[i].DeepCopy())
	}
	kubeClient := apiServerLike{Client: fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		WithStatusSubresource(&v1alpha1.NodeOverlay{}).
		WithObjects(objects...).
		Build(), emptyCapacity: map[string]bool{}}
	for i := range in.overlays {
		if in.overlays[i].Spec.Capacity != nil && len(in.overlays[i].Spec.Capacity) == 0 {
			kubeClient.emptyCapacity[in.overlays[i].Name] = true
		}
	}
	cp := cpfake.NewCloudProvider()
	cp.InstanceTypes = in.instanceTypes
	store := nodeoverlay.NewInstanceTypeStore()
	clk := clock.RealClock{}
	ctx := options.ToContext(context.Background(), &options.Options{
		FeatureGates: options.FeatureGates{NodeOverlay: true},
	})
	return &cluster{
		ctx:        ctx,
		kubeClient: kubeClient,
		controller: nodeoverlay.NewController(clk, kubeClient, cp, store, state.NewCluster(clk, kubeClient, cp)),
		provider:   overlay.Decorate(cp, kubeClient, store),
		base:       in.instanceTypes,
	}
}

// pass is the cost of one reconcile: wall time and the process's CPU time (all threads, GC
// included), the latter being what stays comparable on a shared machine.
type pass struct {
	wall, cpu time.Duration
}

// reconcile runs one full pass: list, runtime validation, conflict detection, store, statuses.
// The request is ignored by the controller (one pass covers every overlay).
func (c *cluster) reconcile() (pass, error) {
	start, cpu := time.Now(), cpuTime()
	for attempt := 0; attempt < 5; attempt++ {
		res, err := c.controller.Reconcile(c.ctx, reconcile.Request{})
		if err != nil {
			return pass{}, err
		}
		// Requeue means a status patch raced; the fake client has no other writer, so
		// this only guards against a surprise.
		if !res.Requeue {
			return pass{wall: time.Since(start), cpu: cpuTime() - cpu}, nil
		}
	}
	return pass{}, fmt.Errorf("reconcile kept asking to requeue")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type overlayResult struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type offeringResult struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	// The IEEE-754 bits of Price, so the comparison does not depend on how JSON prints floats.
	PriceBits     string `json:"priceBits"`
	BasePriceBits string `json:"basePriceBits"`
	Available     bool   `json:"available"`
	PriceOverlay  bool   `json:"priceOverlaid"`
}

type typeResult struct {
	Capacity     map[string]string `json:"capacity"`
	BaseCapacity map[string]string `json:"baseCapacity"`
	// What the scheduler fits pods against: InstanceType.Allocatable() of the decorated type
	// (computeAllocatable: capacity less the empty overhead, hugepages taken off the memory).
	Allocatable     map[string]string `json:"allocatable"`
	CapacityOverlay bool              `json:"capacityOverlaid"`
	Offerings       []offeringResult  `json:"offerings"`
}

// statuses reads each overlay's ValidationSucceeded condition back from the kube client, as
// `kubectl get nodeoverlay` would show it.
func (c *cluster) statuses() (map[string]overlayResult, error) {
	list := &v1alpha1.NodeOverlayList{}
	if err := c.kubeClient.List(c.ctx, list); err != nil {
		return nil, err
	}
	out := map[string]overlayResult{}
	for i := range list.Items {
		cond := list.Items[i].StatusConditions().Get(v1alpha1.ConditionTypeValidationSucceeded)
		r := overlayResult{Status: "Unknown"}
		if cond != nil {
			r.Reason, r.Message = cond.Reason, cond.Message
			switch {
			case cond.IsTrue():
				r.Status = "Applied"
			case cond.Reason == "Conflict":
				r.Status = "Conflict"
			case cond.Reason == "RuntimeValidation":
				r.Status = "Invalid"
			}
		}
		out[list.Items[i].Name] = r
	}
	return out, nil
}

// effects asks the decorated cloud provider for every NodePool's instance types and keeps
// those the store changed (the store returns the provider's own pointer for untouched types).
func (c *cluster) effects(nodePools []v1.NodePool) (map[string]map[string]typeResult, error) {
	base := map[string]*cloudprovider.InstanceType{}
	for _, it := range c.base {
		base[it.Name] = it
	}
	out := map[string]map[string]typeResult{}
	for i := range nodePools {
		its, err := c.provider.GetInstanceTypes(c.ctx, &nodePools[i])
		if err != nil {
			return nil, err
		}
		pool := map[string]typeResult{}
		for _, it := range its {
			if base[it.Name] == it {
				continue
			}
			pool[it.Name] = describe(it, base[it.Name])
		}
		out[nodePools[i].Name] = pool
	}
	return out, nil
}

func describe(it, base *cloudprovider.InstanceType) typeResult {
	r := typeResult{Capacity: quantities(it.Capacity), BaseCapacity: quantities(base.Capacity),
		Allocatable: quantities(it.Allocatable()), CapacityOverlay: it.IsCapacityOverlayApplied()}
	for i, of := range it.Offerings {
		r.Offerings = append(r.Offerings, offeringResult{
			Zone:         of.Zone(),
			CapacityType: of.CapacityType(),
			Price:        of.Price,
			PriceBits:    fmt.Sprintf("%016x", math.Float64bits(of.Price)),
			// The store copies the offerings slice in order, so index i is the same offering.
			BasePriceBits: fmt.Sprintf("%016x", math.Float64bits(base.Offerings[i].Price)),
			Available:     of.Available,
			PriceOverlay:  of.IsPriceOverlaid(),
		})
	}
	return r
}

func quantities(list corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

// apiServerLike undoes the one place where the fake client's storage differs from an API server
// in a way the controller can see: the fake client stores objects through encoding/json, whose
// omitempty drops `capacity: {}`. The API server keeps the empty map, and Karpenter's informer
// decodes it to an empty, non-nil ResourceList, which store.go treats differently from nil (an
// overlay with `capacity: {}` becomes the cell's last capacity overlay and hides a conflict).
type apiServerLike struct {
	client.Client
	emptyCapacity map[string]bool
}

func (c apiServerLike) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if overlays, ok := list.(*v1alpha1.NodeOverlayList); ok {
		for i := range overlays.Items {
			if c.emptyCapacity[overlays.Items[i].Name] && overlays.Items[i].Spec.Capacity == nil {
				overlays.Items[i].Spec.Capacity = corev1.ResourceList{}
			}
		}
	}
	return nil
}
