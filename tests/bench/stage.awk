# Quantiles of one Prometheus histogram between two scrapes of /metrics:
#   awk -v series='NAME_bucket{LABELS,le=' -f stage.awk BEFORE AFTER
# (LABELS, with its comma, only when the series has labels besides le).
# Prints "P50 P99 OVER": the median and the 99th percentile in ms,
# interpolated inside their bucket as Prometheus's histogram_quantile does
# (estimates: the buckets are 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100 ms
# ...), ">B" when it lies past the last bound B; and OVER, the exact share of
# observations above 25 ms in percent. "– – –" when nothing was observed.
FNR == 1 { file++ }
index($0, series) == 1 {
  match($0, /le="[^"]*"/)
  le = substr($0, RSTART + 4, RLENGTH - 5)
  if (file == 1) before[le] = $NF
  else { after[le] = $NF; if (!(le in seen)) { seen[le] = 1; order[++n] = le } }
}
END {
  total = after["+Inf"] - before["+Inf"]
  if (total <= 0) { print "– – –"; exit }
  split("0.5 0.99", q, " ")
  for (k = 1; k <= 2; k++) {
    want = q[k] * total; prev = 0; lo = 0; res = ""
    for (i = 1; i <= n; i++) {
      c = after[order[i]] - before[order[i]]
      if (c >= want) {
        if (order[i] == "+Inf") { res = sprintf(">%.0f", lo * 1000); break }
        hi = order[i] + 0
        res = sprintf("%.2f", (lo + (hi - lo) * (c > prev ? (want - prev) / (c - prev) : 1)) * 1000)
        break
      }
      prev = c; lo = order[i] + 0
    }
    out = out res " "
  }
  printf "%s%.2f%%\n", out, (total - (after["0.025"] - before["0.025"])) * 100 / total
}
