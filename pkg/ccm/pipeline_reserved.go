package ccm

import (
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// registerReservedSources registers what rule 9 of CSR approval reads beyond the configuration: the
// apiserver's endpoints (the EndpointSlice of default/kubernetes, watched from the first certificate request
// on: KubeAPIServerOnDemandController) and, with the Talos API, the Service ranges from the
// control-plane machines' ControllerManagerConfig. The decisions use those ranges only while the
// configuration has no serviceCIDRs, which can change at any time (the file is reloaded), so the source runs
// whenever the Talos API is available: a few reads per control-plane machine. It returns the decision
// options that say which sources run.
func (c *CCM) registerReservedSources() (serviceCIDRsFromTalos bool, err error) {
	apiServer := &kubectrl.KubeAPIServerOnDemandController{NewInformer: func() *kubeclient.InlineInformer {
		return c.requestInformers.Unshared(kubectrl.NewAPIServerInformer)
	}}

	if err = c.runtime.RegisterController(apiServer); err != nil {
		return false, err
	}

	if c.opts.Talos == nil {
		return false, nil
	}

	// node-ipam registers the same source when it has no cluster CIDRs (registerNodeIPAM): once is enough.
	if !c.nodeIPAMReadsControllerManagerConfig() {
		err = c.registerKeyed(c.controllerManagerConfigSource())
	}

	return err == nil, err
}

// nodeIPAMReadsControllerManagerConfig says whether registerNodeIPAM registers the ControllerManagerConfig
// source (its condition, for a valid node-ipam configuration).
func (c *CCM) nodeIPAMReadsControllerManagerConfig() bool {
	return c.enabled[ControllerNodeIPAM] && c.opts.NodeIPAM.Validate() == nil &&
		len(c.opts.NodeIPAM.controllerOptions().WithDefaults().ClusterCIDRs) == 0
}

// controllerManagerConfigSource returns the source of the cluster ranges from the control-plane machines'
// ControllerManagerConfig, which node-ipam and CSR approval's rule 9 read.
func (c *CCM) controllerManagerConfigSource() *talosctrl.ControllerManagerConfigSourceController {
	ts := c.opts.TalosSource

	return &talosctrl.ControllerManagerConfigSourceController{
		Talos: c.opts.Talos,
		Options: talosctrl.ControllerManagerConfigSourceOptions{
			CallTimeout: c.opts.TalosTimeout,
			Refresh:     ts.ControllerManagerConfigRefresh,
			RetryMin:    ts.ControllerManagerConfigRetryMin,
			RetryMax:    ts.ControllerManagerConfigRetryMax,
		},
	}
}
