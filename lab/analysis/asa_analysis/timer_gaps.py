import sys,re,collections
pat=re.compile(r'\[(\d+)\]\s+\S+\s+([\d.]+): (\S+)')
last={};cur={};lt={}
gaps=[];tgaps=[]
ntimer=collections.Counter(); t0=None
for l in open(sys.argv[1]):
    if l.startswith(' =>'): continue
    m=pat.search(l)
    if not m: continue
    c=int(m.group(1)); t=float(m.group(2)); ev=m.group(3)
    t0=t0 or t; t1=t
    if ev=='local_timer_entry:':
        ntimer[c]+=1
        if c in lt and t-lt[c]>0.02: tgaps.append((round(t-lt[c],3),c,lt[c],cur.get(c)))
        lt[c]=t
        continue
    if c in last and t-last[c]>0.02: gaps.append((round(t-last[c],3),c,last[c],cur.get(c)))
    last[c]=t
    n=re.search(r'next_comm=(\S+)',l)
    if n and ev=='sched_switch:': cur[c]=n.group(1)
gaps.sort(reverse=True); tgaps.sort(reverse=True)
print('span %.1f s; sched-event gaps>20ms: %d, sum %.2f s; timer ticks/CPU/s %s; timer gaps>20ms: %d sum %.2f s'%(t1-t0,len(gaps),sum(g[0] for g in gaps),{c:round(n/(t1-t0)) for c,n in ntimer.items()},len(tgaps),sum(g[0] for g in tgaps)))
print(' top sched gaps',gaps[:5]); print(' top timer gaps',tgaps[:5])
