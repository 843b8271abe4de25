package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// The project's catalog, in the shapes simulation/catalog.py reads: the JSON catalog file and
// InstanceType documents. Both become one list of plain offerings before Karpenter's types are
// built, so both paths produce InstanceTypes the same way.

const priceLabel = "karpenter.sh/price"

var capacityTypes = []string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot}

type offeringSpec struct {
	zone, capacityType string
	price              *float64
	available          bool
}

type typeSpec struct {
	name      string
	labels    map[string]string
	capacity  map[string]string
	offerings []offeringSpec
}

type jsonCatalog struct {
	Region        string          `json:"region"`
	InstanceTypes []jsonTypeEntry `json:"instanceTypes"`
}

type jsonTypeEntry struct {
	Name          string                   `json:"name"`
	Labels        map[string]string        `json:"labels"`
	Allocatable   map[string]any           `json:"allocatable"`
	Resources     map[string]any           `json:"resources"`
	OnDemandPrice *float64                 `json:"onDemandPrice"`
	Offerings     []map[string]interface{} `json:"offerings"`
}

func readJSONCatalog(path string) ([]typeSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var data jsonCatalog
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	region := data.Region
	if region == "" {
		region = "us-east-1"
	}
	zones := []string{region + "a", region + "b", region + "c"}
	out := make([]typeSpec, 0, len(data.InstanceTypes))
	for _, e := range data.InstanceTypes {
		labels := map[string]string{}
		for k, v := range e.Labels {
			labels[k] = v
		}
		setDefault(labels, corev1.LabelInstanceTypeStable, e.Name)
		// As simulation/catalog.py: the AWS provider gives every type a region requirement.
		setDefault(labels, corev1.LabelTopologyRegion, region)
		resources := e.Allocatable
		if resources == nil {
			resources = e.Resources
		}
		spec := typeSpec{name: e.Name, labels: labels, capacity: stringMap(resources)}
		if e.Offerings != nil {
			for _, o := range e.Offerings {
				of, err := offeringFrom(o)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", path, e.Name, err)
				}
				spec.offerings = append(spec.offerings, of)
			}
		} else {
			for _, ct := range capacityTypes {
				for _, z := range zones {
					spec.offerings = append(spec.offerings, offeringSpec{zone: z, capacityType: ct,
						price: e.OnDemandPrice, available: e.OnDemandPrice != nil})
				}
			}
		}
		out = append(out, spec)
	}
	return out, nil
}

// typeFromDocument reads an InstanceType document (karpenter.sh/v1alpha1, the RFC's shape).
func typeFromDocument(doc map[string]any) (typeSpec, error) {
	meta, _ := doc["metadata"].(map[string]any)
	spec, _ := doc["spec"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" || spec == nil {
		return typeSpec{}, fmt.Errorf("InstanceType document without metadata.name or spec")
	}
	labels := stringMap(asMap(meta["labels"]))
	setDefault(labels, corev1.LabelInstanceTypeStable, name)
	out := typeSpec{name: name, labels: labels, capacity: stringMap(asMap(spec["resources"]))}
	rawOfferings, _ := spec["offerings"].([]any)
	for _, r := range rawOfferings {
		of, err := offeringFrom(asMap(r))
		if err != nil {
			return typeSpec{}, fmt.Errorf("InstanceType %s: %w", name, err)
		}
		out.offerings = append(out.offerings, of)
	}
	return out, nil
}

func offeringFrom(raw map[string]any) (offeringSpec, error) {
	zone := firstString(raw, corev1.LabelTopologyZone, "zone")
	ct := firstString(raw, v1.CapacityTypeLabelKey, "capacityType")
	if zone == "" || ct == "" {
		return offeringSpec{}, fmt.Errorf("an offering needs a zone and a capacity type")
	}
	of := offeringSpec{zone: zone, capacityType: ct, available: true}
	if a, ok := raw["available"].(bool); ok {
		of.available = a
	}
	p, ok := raw[priceLabel]
	if !ok {
		p = raw["price"]
	}
	switch v := p.(type) {
	case nil:
	case float64:
		of.price = &v
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return offeringSpec{}, fmt.Errorf("price %q is not a number", v)
		}
		of.price = &f
	default:
		return offeringSpec{}, fmt.Errorf("price %v is not a number", v)
	}
	return of, nil
}

// instanceType builds what a cloud provider's GetInstanceTypes returns: requirements from the
// labels plus the zones and capacity types of the offerings, one offering per zone and capacity
// type, and no overhead, so that allocatable equals the catalog's (already net) resources.
func (t typeSpec) instanceType() (*cloudprovider.InstanceType, error) {
	capacity := corev1.ResourceList{}
	for k, v := range t.capacity {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: resource %s: %w", t.name, k, err)
		}
		capacity[corev1.ResourceName(k)] = q
	}
	reqs := scheduling.NewLabelRequirements(t.labels)
	zones, cts := []string{}, []string{}
	offerings := cloudprovider.Offerings{}
	for _, o := range t.offerings {
		zones = append(zones, o.zone)
		cts = append(cts, o.capacityType)
		price := 0.0
		if o.price != nil {
			price = *o.price
		}
		offerings = append(offerings, &cloudprovider.Offering{
			Requirements: scheduling.NewLabelRequirements(map[string]string{
				v1.CapacityTypeLabelKey:  o.capacityType,
				corev1.LabelTopologyZone: o.zone,
			}),
			Price:     price,
			Available: o.available,
		})
	}
	reqs.Add(
		scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...),
		scheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...),
	)
	return &cloudprovider.InstanceType{
		Name:         t.name,
		Requirements: reqs,
		Offerings:    offerings,
		Capacity:     capacity,
		Overhead:     &cloudprovider.InstanceTypeOverhead{},
	}, nil
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	return ""
}

// stringMap keeps quantities as the text they were written in; JSON numbers are printed the
// shortest way that reads back the same.
func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}
