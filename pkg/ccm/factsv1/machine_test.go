package factsv1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// contractMachine is a machine with every field set, as hosts write it.
var contractMachine = factsv1.Machine{
	NodeName: "w1", Hostname: "worker-1", Platform: "aws", Region: "eu-west-1", Zone: "eu-west-1a",
	InstanceType: "m5.large", InstanceID: "i-1", ProviderID: "aws:///eu-west-1a/i-1", Spot: true,
	InternalDNS: "ip-10-0-1-4.internal", ExternalDNS: "w1.example.com", Tags: map[string]string{"team": "a"},
	MachineUUID: "4c4c4544-0042-3510-8052-b4c04f4e5632", NodeIPs: []string{"10.0.1.4"},
	Addresses: []factsv1.Address{{Address: "10.0.1.4/24", Link: "eth0"}, {Address: "203.0.113.4", Exposure: factsv1.ExposurePublic}},
}

// TestMachineFileNames pins the names of version 1 in YAML and JSON: files written for it keep working.
func TestMachineFileNames(t *testing.T) {
	t.Parallel()

	const doc = `
nodeName: w1
hostname: worker-1
platform: aws
region: eu-west-1
zone: eu-west-1a
instanceType: m5.large
instanceID: i-1
providerID: aws:///eu-west-1a/i-1
spot: true
internalDNS: ip-10-0-1-4.internal
externalDNS: w1.example.com
tags: {team: a}
machineUUID: 4c4c4544-0042-3510-8052-b4c04f4e5632
nodeIPs: [10.0.1.4]
addresses:
  - {address: 10.0.1.4/24, link: eth0}
  - {address: 203.0.113.4, exposure: public}
`

	var fromYAML factsv1.Machine

	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&fromYAML))
	assert.Equal(t, contractMachine, fromYAML)

	data, err := json.Marshal(contractMachine)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"nodeName": "w1", "hostname": "worker-1", "platform": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
		"instanceType": "m5.large", "instanceID": "i-1", "providerID": "aws:///eu-west-1a/i-1", "spot": true,
		"internalDNS": "ip-10-0-1-4.internal", "externalDNS": "w1.example.com", "tags": {"team": "a"},
		"machineUUID": "4c4c4544-0042-3510-8052-b4c04f4e5632", "nodeIPs": ["10.0.1.4"],
		"addresses": [{"address": "10.0.1.4/24", "link": "eth0"}, {"address": "203.0.113.4", "exposure": "public"}]
	}`, string(data))

	// Only the Node name is written when nothing else is known.
	data, err = json.Marshal(factsv1.Machine{NodeName: "w1"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"nodeName": "w1"}`, string(data))
}
