package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"unique"

	resourcev1 "k8s.io/api/resource/v1"

	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling/dynamicresources"
)

// The DRA RFC's spec.dynamicResources is not a field of Karpenter v1.15's NodeOverlay (its
// controller never sees it), but v1.15 carries the in-memory model a cloud provider fills in for
// an instance type: cloudprovider.DynamicResources. Each overlay's templates are converted into
// that model the way the RFC describes them (a template is a pool, bindingKeys and
// attributeBindings become AttributeBindings over DeviceIDs), decoded strictly into the
// resource.k8s.io/v1 types Karpenter uses, and the bindings are handed to the scheduler's own
// BuildAttributeBindings to see which of them Karpenter would honour.

const draNodePool = "dra"

type draBinding struct {
	Attribute string   `json:"attribute"`
	Devices   []string `json:"devices"`
	// Where it came from: "bindingKey <key>" or "attributeBindings[i]".
	Source string `json:"source"`
	// Every pair of its devices is bound in the scheduler's binding graph.
	Bound bool `json:"bound"`
}

type draResult struct {
	Overlay   string       `json:"overlay"`
	Templates int          `json:"templates"`
	Devices   int          `json:"devices"`
	Bindings  []draBinding `json:"bindings"`
	// What Karpenter's types refuse (strict decoding), one line each.
	Errors []string `json:"errors"`
	// Fields the model has no place for, so Karpenter would drop them without a word.
	Ignored []string `json:"ignored"`
}

// The fields of a template's spec and of a device that cloudprovider.DynamicResources can hold.
var (
	modelTemplateFields = map[string]bool{"driver": true, "devices": true, "sharedCounters": true}
	modelDeviceFields   = map[string]bool{"name": true, "attributes": true, "capacity": true,
		"allowMultipleAllocations": true, "consumesCounters": true}
)

func ignoredFields(where string, m map[string]any, kept map[string]bool) []string {
	var out []string
	for k := range m {
		if !kept[k] {
			out = append(out, where+"."+k)
		}
	}
	sort.Strings(out)
	return out
}

func dynamicResources(in *input) ([]draResult, error) {
	names := make([]string, 0, len(in.rawOverlays))
	for name := range in.rawOverlays {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []draResult
	for _, name := range names {
		spec := asMap(in.rawOverlays[name]["spec"])
		dr := asMap(spec["dynamicResources"])
		if dr == nil {
			continue
		}
		out = append(out, convertOverlay(name, dr))
	}
	return out, nil
}

type bindingKeyUse struct {
	attribute string
	device    cloudprovider.DeviceID
}

func convertOverlay(name string, dr map[string]any) draResult {
	res := draResult{Overlay: name, Bindings: []draBinding{}, Errors: []string{}, Ignored: []string{}}
	fail := func(format string, args ...any) { res.Errors = append(res.Errors, fmt.Sprintf(format, args...)) }
	drivers := map[string]string{} // template name -> driver
	keys := map[string][]bindingKeyUse{}
	var keyOrder []string
	model := cloudprovider.DynamicResources{}
	templates, _ := dr["resourceSliceTemplates"].([]any)
	for ti, rawTemplate := range templates {
		t := asMap(rawTemplate)
		tname, _ := asMap(t["metadata"])["name"].(string)
		tspec := asMap(t["spec"])
		driver, _ := tspec["driver"].(string)
		drivers[tname] = driver
		res.Ignored = append(res.Ignored, ignoredFields(fmt.Sprintf("resourceSliceTemplates[%d].spec", ti), tspec,
			modelTemplateFields)...)
		template := &cloudprovider.ResourceSliceTemplate{
			Driver: unique.Make(driver),
			Pool:   cloudprovider.ResourcePool{Name: unique.Make(tname)},
		}
		if err := strictInto(tspec["sharedCounters"], &template.SharedCounters); err != nil {
			fail("resourceSliceTemplates[%d].spec.sharedCounters: %v", ti, err)
		}
		devices, _ := tspec["devices"].([]any)
		for di, rawDevice := range devices {
			d := asMap(rawDevice)
			dname, _ := d["name"].(string)
			where := fmt.Sprintf("resourceSliceTemplates[%d].spec.devices[%d]", ti, di)
			res.Ignored = append(res.Ignored, ignoredFields(where, d, modelDeviceFields)...)
			device := cloudprovider.Device{
				Name:       unique.Make(dname),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{},
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{},
			}
			id := cloudprovider.DeviceID{Driver: unique.Make(driver), Pool: unique.Make(tname), Device: unique.Make(dname)}
			for attr, rawValue := range asMap(d["attributes"]) {
				value := asMap(rawValue)
				if key, ok := value["bindingKey"].(string); ok {
					if _, seen := keys[key]; !seen {
						keyOrder = append(keyOrder, key)
					}
					keys[key] = append(keys[key], bindingKeyUse{attribute: attr, device: id})
					continue
				}
				var a resourcev1.DeviceAttribute
				if err := strictInto(rawValue, &a); err != nil {
					fail("%s.attributes[%s]: %v", where, attr, err)
					continue
				}
				device.Attributes[resourcev1.QualifiedName(attr)] = a
			}
			for cname, rawValue := range asMap(d["capacity"]) {
				var c resourcev1.DeviceCapacity
				if err := strictInto(rawValue, &c); err != nil {
					fail("%s.capacity[%s]: %v", where, cname, err)
					continue
				}
				device.Capacity[resourcev1.QualifiedName(cname)] = c
			}
			if v, ok := d["allowMultipleAllocations"].(bool); ok {
				device.AllowMultipleAllocations = v
			}
			if err := strictInto(d["consumesCounters"], &device.ConsumesCounters); err != nil {
				fail("%s.consumesCounters: %v", where, err)
			}
			template.Devices = append(template.Devices, device)
			res.Devices++
		}
		model.ResourceSliceTemplates = append(model.ResourceSliceTemplates, template)
		res.Templates++
	}
	var sources []string
	for _, key := range keyOrder {
		// A key used under two attribute names binds each name separately.
		byAttr := map[string][]cloudprovider.DeviceID{}
		var attrs []string
		for _, use := range keys[key] {
			if _, ok := byAttr[use.attribute]; !ok {
				attrs = append(attrs, use.attribute)
			}
			byAttr[use.attribute] = append(byAttr[use.attribute], use.device)
		}
		for _, attr := range attrs {
			model.AttributeBindings = append(model.AttributeBindings,
				&cloudprovider.AttributeBinding{Attribute: resourcev1.QualifiedName(attr), Devices: byAttr[attr]})
			sources = append(sources, "bindingKey "+key)
		}
	}
	bindings, _ := dr["attributeBindings"].([]any)
	for bi, rawBinding := range bindings {
		b := asMap(rawBinding)
		var ids []cloudprovider.DeviceID
		selectors, _ := b["deviceSelectors"].([]any)
		for _, rawSel := range selectors {
			sel := asMap(rawSel)
			tname, _ := sel["resourceSliceTemplate"].(string)
			dname, _ := sel["device"].(string)
			// An unknown template has no driver; Karpenter's DeviceID takes it anyway.
			ids = append(ids, cloudprovider.DeviceID{Driver: unique.Make(drivers[tname]), Pool: unique.Make(tname),
				Device: unique.Make(dname)})
		}
		attrs, _ := b["attributes"].([]any)
		for _, rawAttr := range attrs {
			attr, _ := rawAttr.(string)
			model.AttributeBindings = append(model.AttributeBindings,
				&cloudprovider.AttributeBinding{Attribute: resourcev1.QualifiedName(attr), Devices: ids})
			sources = append(sources, fmt.Sprintf("attributeBindings[%d]", bi))
		}
	}
	// Karpenter's generated deep copy of the model, then the scheduler's binding graph over it.
	it := &cloudprovider.InstanceType{Name: "overlay-" + name, DynamicResources: *model.DeepCopy()}
	graph := dynamicresources.BuildAttributeBindings(map[string][]*cloudprovider.InstanceType{draNodePool: {it}})
	for i, binding := range it.DynamicResources.AttributeBindings {
		out := draBinding{Attribute: string(binding.Attribute), Source: sources[i], Bound: len(binding.Devices) > 0}
		for a, devA := range binding.Devices {
			out.Devices = append(out.Devices, devA.String())
			for b, devB := range binding.Devices {
				if a != b && !graph.Bound(draNodePool, unique.Make(it.Name), binding.Attribute,
					dynamicresources.DeviceID{DeviceID: devA}, dynamicresources.DeviceID{DeviceID: devB}) {
					out.Bound = false
				}
			}
		}
		if len(binding.Devices) == 1 {
			// Bound(a, a) is true only for a device with a non-empty bound set.
			out.Bound = graph.Bound(draNodePool, unique.Make(it.Name), binding.Attribute,
				dynamicresources.DeviceID{DeviceID: binding.Devices[0]}, dynamicresources.DeviceID{DeviceID: binding.Devices[0]})
		}
		res.Bindings = append(res.Bindings, out)
	}
	return res
}

// strictInto decodes a YAML-derived value into a Kubernetes API type, refusing unknown fields as
// an API server's strict field validation does.
func strictInto(value any, into any) error {
	if value == nil {
		return nil
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
