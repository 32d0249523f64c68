import re,sys,collections
f=sys.argv[1]
sw=re.compile(r'\s*(\S+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: prev_comm=(\S+) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)')
wk=re.compile(r'\s*(\S+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_wakeup: comm=(\S+) pid=(\d+) prio=\d+ target_cpu=(\d+)')
lines=open(f).read().split('\n')
state=collections.Counter(); stacks=collections.Counter()
run=collections.defaultdict(float); runstart={}
cpu_of=collections.defaultdict(collections.Counter)
wait=collections.defaultdict(float); wakeat={}
nwait=collections.Counter()
comm={}
i=0
t0=None;t1=None
while i<len(lines):
    l=lines[i]; m=sw.match(l)
    if m:
        cpu=int(m.group(3)); t=float(m.group(4)); pc,pp,ps,nc,np=m.group(5),int(m.group(6)),m.group(7),m.group(8),int(m.group(9))
        t0=t0 or t; t1=t
        comm[pp]=pc; comm[np]=nc
        if pp in runstart: run[pp]+=t-runstart.pop(pp)
        runstart[np]=t
        cpu_of[np][cpu]+=1
        if np in wakeat: wait[np]+=t-wakeat.pop(np); nwait[np]+=1
        if ps.startswith('R'): wakeat[pp]=t  # preempted: waiting again
        state[(pc,pp,ps)]+=1
        if ps=='D' and i+1<len(lines) and '<stack trace>' in lines[i+1]:
            st=[]; j=i+2
            while j<len(lines) and lines[j].startswith(' =>'):
                st.append(lines[j][4:]); j+=1
            key=' < '.join([s for s in st if not s.startswith(('trace_event','__traceiter','__schedule','schedule'))][:5])
            stacks[(pc,key)]+=1
        i+=1; continue
    m=wk.match(l)
    if m:
        t=float(m.group(4)); pid=int(m.group(6)); comm[pid]=m.group(5)
        wakeat[pid]=t
    i+=1
T=t1-t0
print("span %.2f s"%T)
pids=sorted({p for (c,p,s) in state if c=='sysbench'} )
for p in pids:
    ss={s:n for (c,pp,s),n in state.items() if pp==p}
    print(p, 'run %.1f%%'%(100*run[p]/T), 'wait %.1f%% (%d waits, %.0f us avg)'%(100*wait[p]/T,nwait[p],1e6*wait[p]/max(1,nwait[p])), ss, dict(cpu_of[p]))
print("--- top D stacks")
for (c,k),n in stacks.most_common(12): print(n,c,k)
print("--- other tasks by run")
for p,r in sorted(run.items(), key=lambda x:-x[1])[:20]:
    if comm.get(p)!='sysbench': print(comm.get(p),p,'run %.1f%%'%(100*r/T),'wait %.1f%% n=%d avg %.0f us'%(100*wait[p]/T,nwait[p],1e6*wait[p]/max(1,nwait[p])))
