import json,sys,glob,re
d=sys.argv[1]
for f in sorted(glob.glob(d+'/progs-*-before.json')):
    tag=f[len(d)+7:-12]
    b={p['id']:p for p in json.load(open(f))}
    a={p['id']:p for p in json.load(open(f.replace('before','after')))}
    print('==',tag)
    tot=0
    for i,p in a.items():
        if p.get('type')!='struct_ops': continue
        pb=b.get(i,{})
        cnt=p.get('run_cnt',0)-pb.get('run_cnt',0); ns=p.get('run_time_ns',0)-pb.get('run_time_ns',0)
        if cnt: print(f"  {p.get('name'):24} {cnt/10:9.0f}/s {ns/cnt:7.0f} ns/call {ns/1e8:6.2f} %"); tot+=ns
    print(f"  total {tot/1e8:.2f} % of one CPU")
