// Package specs holds the protobuf specs of talos-ccm's COSI resources, generated from api/proto/specs
// (`make generate`), plus their YAML encoding.
package specs
