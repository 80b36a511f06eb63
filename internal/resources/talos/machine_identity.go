package talos

import "fmt"

// OtherMachineReason says why the machine at ip gives node nothing: it names itself another node
// (nodename), or none. read false means the machine was not asked yet.
func OtherMachineReason(ip, node, nodename string, read bool) string {
	switch {
	case !read:
		return fmt.Sprintf("machine at %s was not asked yet which node it is", ip)
	case nodename == "":
		return fmt.Sprintf("machine at %s publishes no Nodename (Nodenames.kubernetes.talos.dev), so it is not known to be %s", ip, node)
	default:
		return fmt.Sprintf("machine at %s is node %s, not %s", ip, nodename, node)
	}
}
