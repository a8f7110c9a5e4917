package frontier

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// extendScript pushes the deadlines of leases that this slave still holds.
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, slave, lease_ms, n, then n × (url, token), then cfg.
// Returns: n values, 1 when the lease was held and extended, 0 when lost.
var extendScript = redis.NewScript(luaPrelude + `
local slave, lease_ms, n = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local own_err = check_own(slave)
if own_err then return own_err end
local now = now_ms()
local out = {}
for e = 0, n - 1 do
  local url, token = ARGV[5 + 2 * e], ARGV[6 + 2 * e]
  local data = redis.call('HGET', k_sld(slave), url)
  local ok = 0
  if data then
    local d = lease_fields(data)
    if d[1] == slave and d[2] == token then
      redis.call('ZADD', k_slease(slave), 'XX', now + lease_ms, url)
      ok = 1
    end
  end
  out[#out + 1] = ok
end
return out
`)

// Extend implements Frontier.
func (f *shard) Extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	args := []any{slave, ms(f.opt.LeaseDuration), len(leases)}
	for _, l := range leases {
		args = append(args, l.URL, l.Token)
	}
	res, err := f.run(ctx, extendScript, args...)
	if err != nil {
		return nil, wrap("extend leases", err)
	}
	arr, _ := res.([]any)
	if len(arr) != len(leases) {
		return nil, fmt.Errorf("extend leases: script returned %d values for %d leases", len(arr), len(leases))
	}
	held := make([]bool, len(leases))
	for i := range arr {
		v, _ := toInt(arr[i])
		held[i] = v == 1
	}
	return held, nil
}
