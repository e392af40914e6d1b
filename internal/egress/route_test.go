package egress

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultRouteIfaces(t *testing.T) {
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"eth1\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	require.Equal(t, map[string]bool{"eth1": true}, defaultRouteIfaces(route))
	require.Empty(t, defaultRouteIfaces(""))
}
