// flux-build renders a Flux Kustomization the way kustomize-controller does, with Flux's own code
// (github.com/fluxcd/pkg/kustomize, pinned in go.mod), as the oracle for overlay-lint's Flux renderer
// (sources/flux.py). See README.md.
//
//	flux-build REPO KUSTOMIZATION.yaml    the rendered objects as a YAML stream on stdout
//
// REPO is copied to a scratch directory first: Flux writes its generated kustomization.yaml into the
// path it builds, and the input must stay as it was.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: flux-build REPO KUSTOMIZATION.yaml")
		return 2
	}
	out, err := build(args[0], args[1])
	if err != nil {
		fmt.Fprintf(stderr, "flux-build: %v\n", err)
		return 1
	}
	_, err = stdout.Write(out)
	if err != nil {
		return 1
	}
	return 0
}

func build(repo, objectFile string) ([]byte, error) {
	data, err := os.ReadFile(objectFile)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", objectFile, err)
	}
	ks := unstructured.Unstructured{Object: obj}
	path, _, err := unstructured.NestedString(obj, "spec", "path")
	if err != nil {
		return nil, err
	}

	scratch, err := os.MkdirTemp("", "flux-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	root := filepath.Join(scratch, "repo")
	if err := os.CopyFS(root, os.DirFS(repo)); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, path)

	// As kustomize-controller's build: generate (or amend) the kustomization, build it on a file
	// system confined to the source root, then substitute per resource when postBuild is set.
	gen := kustomize.NewGenerator(root, ks)
	if _, err := gen.WriteFile(dir, kustomize.WithSaveOriginalKustomization()); err != nil {
		return nil, fmt.Errorf("generating the kustomization: %w", err)
	}
	resources, err := kustomize.SecureBuild(root, dir, false)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj, "spec", "postBuild"); ok {
		for _, res := range resources.Resources() {
			// Dry run: substituteFrom's ConfigMaps and Secrets live in a cluster, and only the literal
			// spec.postBuild.substitute is compared.
			out, err := kustomize.SubstituteVariables(context.Background(), nil, ks, res,
				kustomize.SubstituteWithDryRun(true))
			if err != nil {
				return nil, fmt.Errorf("substituting in %s: %w", res.CurId(), err)
			}
			if out != nil {
				if _, err := resources.Replace(res); err != nil {
					return nil, err
				}
			}
		}
	}
	return resources.AsYaml()
}
