package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

type input struct {
	overlays        []v1alpha1.NodeOverlay
	nodePools       []v1.NodePool
	instanceTypes   []*cloudprovider.InstanceType
	implicitDefault bool
	// The raw overlay documents, for the parts Karpenter's NodeOverlay type does not carry
	// (the DRA RFC's spec.dynamicResources).
	rawOverlays map[string]map[string]any
}

// readInput reads every *.yaml, *.yml and *.json file under dir (multi-document YAML allowed).
// InstanceType documents, when present, replace the catalog, as overlay-lint does.
func readInput(dir string, catalog []typeSpec) (*input, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	in := &input{rawOverlays: map[string]map[string]any{}}
	var docTypes []typeSpec
	for _, f := range files {
		docs, err := readDocuments(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			kind, _ := doc["kind"].(string)
			switch kind {
			case "NodeOverlay":
				var o v1alpha1.NodeOverlay
				if err := convert(doc, &o); err != nil {
					return nil, fmt.Errorf("%s: NodeOverlay: %w", f, err)
				}
				in.overlays = append(in.overlays, o)
				in.rawOverlays[o.Name] = doc
			case "NodePool":
				var np v1.NodePool
				if err := convert(doc, &np); err != nil {
					return nil, fmt.Errorf("%s: NodePool: %w", f, err)
				}
				in.nodePools = append(in.nodePools, np)
			case "InstanceType":
				t, err := typeFromDocument(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				docTypes = append(docTypes, t)
			}
		}
	}
	if docTypes != nil {
		catalog = docTypes
	}
	if catalog == nil {
		return nil, errors.New("no InstanceType documents and no -catalog")
	}
	for _, t := range catalog {
		it, err := t.instanceType()
		if err != nil {
			return nil, err
		}
		in.instanceTypes = append(in.instanceTypes, it)
	}
	if len(in.nodePools) == 0 {
		in.implicitDefault = true
		in.nodePools = []v1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	}
	return in, nil
}

func readDocuments(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
}

// convert goes through JSON, the way the API server's objects reach a controller.
func convert(doc map[string]any, into any) error {
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}
