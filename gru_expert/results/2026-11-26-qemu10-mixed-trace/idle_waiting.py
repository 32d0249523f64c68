#!/usr/bin/env python3
"""Idle time on each CPU of a tracefs trace, split by whether a task was runnable meanwhile."""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from tracefs_events import SW, WK  # noqa: E402
ev=[]
for l in open(sys.argv[1], errors='replace'):
    m=SW.match(l)
    if m: ev.append(('sw',int(m.group(3)),float(m.group(4)),m.group(5),int(m.group(6)),m.group(7).rstrip('+'),m.group(8),int(m.group(9)))); continue
    m=WK.match(l)
    if m: ev.append(('wk',int(m.group(3)),float(m.group(4)),m.group(5),int(m.group(6)),int(m.group(7))))
waiting={}  # pid -> since (runnable, not running)
comm={}
idle_since={}
tot=collections.Counter(); n=collections.Counter(); ex=[]
t0=ev[0][2]
for e in ev:
    if e[0]=='wk':
        waiting[e[4]]=e[2]; comm[e[4]]=e[3]; continue
    _,cpu,t,pc,pp,ps,nc,np_=e
    comm[pp]=pc; comm[np_]=nc
    if pp==0 and cpu in idle_since:
        s=idle_since.pop(cpu)
        w=[p for p,since in waiting.items() if since<s]
        key='idle with %s waiting'%('some' if w else 'none')
        tot[key]+=t-s; n[key]+=1
        if w and t-s>0.002 and len(ex)<8: ex.append((round(s-t0,4),cpu,round((t-s)*1e3,2),[comm.get(p) for p in w]))
    if ps=='R' and pp!=0: waiting[pp]=t
    waiting.pop(np_,None)
    if np_==0: idle_since[cpu]=t
for k in tot: print(k, 'n=%d'%n[k], 'total %.3f s'%tot[k])
for x in ex: print(x)
