package configfile

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Merge returns the config in force: every setting of the file, the flags' values for what the file does
// not set, and the flags named in explicit (ConfigSpec protobuf field names) over the file. file nil
// means no config file.
func Merge(flags *specs.ConfigSpec, explicit []string, file *specs.ConfigSpec) *specs.ConfigSpec {
	if file == nil {
		return proto.CloneOf(flags)
	}

	out := proto.CloneOf(file)

	isExplicit := make(map[string]bool, len(explicit))
	for _, name := range explicit {
		isExplicit[name] = true
	}

	mergeMessage(out.ProtoReflect(), proto.CloneOf(flags).ProtoReflect(), isExplicit, "")

	out.Source = file.GetSource() + " and flags"
	out.FileSha256 = file.GetFileSha256()
	out.ClusterNameSource = flags.GetClusterNameSource()

	if file.GetClusterName() != "" && !isExplicit["cluster_name"] {
		out.ClusterNameSource = "global.clusterName of the config " + file.GetSource()
	}

	return out
}

// mergeMessage merges the flags src into the file's dst field by field: an explicit flag (named by its
// path of protobuf field names, such as "csr_approval.max_expiration_seconds") wins, a flag fills what the
// file does not set, and a section both set (csrApproval) is merged the same way, so that a file section
// that leaves a setting out does not drop the flag's value for it.
func mergeMessage(dst, src protoreflect.Message, isExplicit map[string]bool, prefix string) {
	fields := src.Descriptor().Fields()

	for i := range fields.Len() {
		fd := fields.Get(i)
		name := prefix + string(fd.Name())

		switch {
		case isExplicit[name] && !src.Has(fd):
			// An explicit flag with its zero value (--prefer-ipv6=false) still wins.
			dst.Clear(fd)
		case isExplicit[name]:
			dst.Set(fd, src.Get(fd))
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap() && src.Has(fd) && dst.Has(fd):
			mergeMessage(dst.Mutable(fd).Message(), src.Get(fd).Message(), isExplicit, name+".")
		case src.Has(fd) && !dst.Has(fd):
			dst.Set(fd, src.Get(fd))
		}
	}
}
