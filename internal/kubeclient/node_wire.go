package kubeclient

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Node as a kubelet posts it is about 13 KB of protobuf, most of it the status talos-ccm never reads (50 or
// so images, node info, capacity, allocatable, the other conditions) and the managed fields. Decoding it
// whole for every watch event, then trimming it (k8ssink.TrimNode), was two fifths of everything talos-ccm
// allocated while 5,000 Nodes joined. trimNodeEnvelope drops those fields from the encoded Node before it is
// decoded, walking the protobuf wire format without decoding anything it keeps: what is decoded is what
// TrimNode would keep.

// protobufMagic starts every object the apiserver encodes as protobuf (an envelope, runtime.Unknown, follows).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// Field numbers of the messages walked (k8s.io/api/core/v1 and apimachinery's generated.proto).
const (
	unknownTypeMeta        = 1 // runtime.Unknown.typeMeta
	unknownRaw             = 2 // runtime.Unknown.raw
	unknownContentEncoding = 3 // runtime.Unknown.contentEncoding
	typeMetaKind           = 2 // runtime.TypeMeta.kind
	nodeMetadata           = 1 // Node.metadata
	nodeStatus             = 3 // Node.status
	nodeListItems          = 2 // NodeList.items
	objectMetaManaged      = 17
	nodeStatusConditions   = 4
	nodeStatusAddresses    = 5
	nodeConditionType      = 1
)

// errNotTrimmed says that the data is not a protobuf-encoded Node or NodeList this package trims.
var errNotTrimmed = errors.New("not a plain protobuf Node or NodeList")

// trimNodeEnvelope returns data, a protobuf-encoded object with its magic and envelope, with the Node (or
// every Node of a NodeList) in it trimmed as TrimNode trims it. Anything else, or data it cannot walk, is
// errNotTrimmed or another error: the caller decodes data as it is then, and the decoder says what is wrong.
func trimNodeEnvelope(data []byte) ([]byte, error) {
	body, ok := bytes.CutPrefix(data, protobufMagic)
	if !ok {
		return nil, errNotTrimmed
	}

	var kind string

	raw, found := []byte(nil), false

	err := eachField(body, func(num protowire.Number, typ protowire.Type, value []byte) error {
		switch {
		case num == unknownTypeMeta && typ == protowire.BytesType:
			return eachField(value, func(num protowire.Number, typ protowire.Type, value []byte) error {
				if num == typeMetaKind && typ == protowire.BytesType {
					kind = string(value)
				}

				return nil
			})
		case num == unknownRaw && typ == protowire.BytesType:
			raw, found = value, true
		case num == unknownContentEncoding && len(value) > 0:
			// A compressed body would have to be inflated first: the apiserver sends none.
			return errNotTrimmed
		}

		return nil
	})

	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, errNotTrimmed
	}

	var trimmed []byte

	switch kind {
	case "Node":
		trimmed, err = trimNode(nil, raw)
	case "NodeList":
		trimmed, err = trimNodeList(raw)
	default:
		return nil, errNotTrimmed
	}

	if err != nil {
		return nil, err
	}

	// The envelope again, with the trimmed object: every field but raw as it was.
	out := make([]byte, 0, len(protobufMagic)+len(trimmed)+64)
	out = append(out, protobufMagic...)

	err = eachFieldRaw(body, func(num protowire.Number, field []byte) {
		if num == unknownRaw {
			out = protowire.AppendTag(out, unknownRaw, protowire.BytesType)
			out = protowire.AppendBytes(out, trimmed)

			return
		}

		out = append(out, field...)
	})

	return out, err
}

// trimNodeList trims every item of an encoded NodeList.
func trimNodeList(list []byte) ([]byte, error) {
	out := make([]byte, 0, len(list)/4)

	var err error

	walkErr := eachFieldRaw(list, func(num protowire.Number, field []byte) {
		if num != nodeListItems || err != nil {
			out = append(out, field...)

			return
		}

		var item []byte

		if item, err = fieldBytes(field); err != nil {
			return
		}

		var trimmed []byte

		if trimmed, err = trimNode(nil, item); err != nil {
			return
		}

		out = protowire.AppendTag(out, nodeListItems, protowire.BytesType)
		out = protowire.AppendBytes(out, trimmed)
	})

	return out, errors.Join(walkErr, err)
}

// trimNode appends the encoded Node, trimmed, to out: its metadata without managed fields, its spec, and of
// its status the addresses and the Ready condition.
func trimNode(out, node []byte) ([]byte, error) {
	var err error

	walkErr := eachFieldRaw(node, func(num protowire.Number, field []byte) {
		if err != nil {
			return
		}

		var value, kept []byte

		switch num {
		case nodeMetadata:
			if value, err = fieldBytes(field); err == nil {
				kept, err = keepFields(value, func(num protowire.Number, _ []byte) (bool, error) {
					return num != objectMetaManaged, nil
				})
			}
		case nodeStatus:
			if value, err = fieldBytes(field); err == nil {
				kept, err = keepFields(value, keptStatusField)
			}
		default:
			out = append(out, field...)

			return
		}

		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendBytes(out, kept)
	})

	return out, errors.Join(walkErr, err)
}

// keptStatusField says whether a field of NodeStatus stays: the addresses, and the Ready condition.
func keptStatusField(num protowire.Number, field []byte) (bool, error) {
	switch num {
	case nodeStatusAddresses:
		return true, nil
	case nodeStatusConditions:
		condition, err := fieldBytes(field)
		if err != nil {
			return false, err
		}

		ready := false

		err = eachField(condition, func(num protowire.Number, typ protowire.Type, value []byte) error {
			if num == nodeConditionType && typ == protowire.BytesType {
				ready = string(value) == "Ready"
			}

			return nil
		})

		return ready, err
	default:
		return false, nil
	}
}

// keepFields returns the fields of an encoded message that keep says stay, as they were encoded. The kept
// fields are found first and copied once, into a buffer of their size (a kubelet's status keeps a few
// hundred of its 13,000 bytes).
func keepFields(msg []byte, keep func(protowire.Number, []byte) (bool, error)) ([]byte, error) {
	var (
		kept [][]byte
		size int
		err  error
	)

	walkErr := eachFieldRaw(msg, func(num protowire.Number, field []byte) {
		if err != nil {
			return
		}

		var ok bool

		if ok, err = keep(num, field); ok {
			kept = append(kept, field)
			size += len(field)
		}
	})

	if err = errors.Join(walkErr, err); err != nil {
		return nil, err
	}

	out := make([]byte, 0, size)

	for _, field := range kept {
		out = append(out, field...)
	}

	return out, nil
}

// eachField calls fn with the number, wire type and value of each field of an encoded message (a
// length-delimited field's value is its contents, any other's its encoding).
func eachField(msg []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	return walkFields(msg, func(num protowire.Number, typ protowire.Type, value, _ []byte) error {
		return fn(num, typ, value)
	})
}

// eachFieldRaw calls fn with the number and the whole encoding (tag and value) of each field of an encoded
// message.
func eachFieldRaw(msg []byte, fn func(protowire.Number, []byte)) error {
	return walkFields(msg, func(num protowire.Number, _ protowire.Type, _, field []byte) error {
		fn(num, field)

		return nil
	})
}

// walkFields calls fn with the number, wire type, value (a length-delimited field's contents, any other's
// encoding) and whole encoding of each field of an encoded message, and stops at its first error.
func walkFields(msg []byte, fn func(num protowire.Number, typ protowire.Type, value, field []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("failed to read a field's tag: %w", protowire.ParseError(n))
		}

		size := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if size < 0 {
			return fmt.Errorf("failed to read field %d: %w", num, protowire.ParseError(size))
		}

		value := msg[n : n+size]

		if typ == protowire.BytesType {
			var m int

			if value, m = protowire.ConsumeBytes(value); m < 0 {
				return fmt.Errorf("failed to read field %d: %w", num, protowire.ParseError(m))
			}
		}

		if err := fn(num, typ, value, msg[:n+size]); err != nil {
			return err
		}

		msg = msg[n+size:]
	}

	return nil
}

// fieldBytes is the contents of an encoded length-delimited field (tag and value).
func fieldBytes(field []byte) ([]byte, error) {
	_, typ, n := protowire.ConsumeTag(field)
	if n < 0 {
		return nil, fmt.Errorf("failed to read a field's tag: %w", protowire.ParseError(n))
	}

	if typ != protowire.BytesType {
		return nil, fmt.Errorf("a message field of wire type %d: %w", typ, errNotTrimmed)
	}

	value, m := protowire.ConsumeBytes(field[n:])
	if m < 0 {
		return nil, fmt.Errorf("failed to read a field: %w", protowire.ParseError(m))
	}

	return value, nil
}
