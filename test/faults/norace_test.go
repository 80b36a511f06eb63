//go:build faults && !race

package faults_test

// raceEnabled says that the suite runs with the race detector, and may build talos-ccm with it.
const raceEnabled = false
