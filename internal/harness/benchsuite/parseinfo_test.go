package benchsuite

import (
	"math"
	"testing"
)

func TestParseInfo(t *testing.T) {
	tests := []struct {
		name  string
		info  string
		cpu   float64
		calls int64
		lua   int64
	}{
		{"empty", "", 0, 0, 0},
		{"cpu and commands", "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.0\r\n" +
			"# Commandstats\r\ncmdstat_zadd:calls=10,usec=30,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n" +
			"cmdstat_client|list:calls=3,usec=9,usec_per_call=3.00\r\n", 3.75, 13, 0},
		{"malformed lines add nothing", "used_cpu_sys:x\r\ncmdstat_get:usec=3\r\n", 0, 0, 0},
		{"the functions' Lua heap", "# Memory\r\nused_memory_vm_eval:31744\r\nused_memory_vm_functions:833536\r\n", 0, 0, 833536},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ri := parseInfo(tt.info)
			cpu, calls := ri.cpu, ri.calls
			if math.Abs(cpu-tt.cpu) > 1e-9 || calls != tt.calls || ri.luaFnBytes != tt.lua {
				t.Errorf("parseInfo = %v, %d, lua %d; want %v, %d, lua %d", cpu, calls, ri.luaFnBytes, tt.cpu, tt.calls, tt.lua)
			}
		})
	}
}
