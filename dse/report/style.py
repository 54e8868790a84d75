"""The report page's inline style sheet and its few lines of script (sortable tables, colour buttons)."""

__all__ = ["CSS", "JS"]

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555}.panels{display:flex;flex-wrap:wrap;gap:8px}
svg text{font-size:11px;fill:#333}svg .axis{font-size:12px;fill:#111}
svg .plot{fill:#fafafa;stroke:#bbb}svg .grid{stroke:#e6e6e6}
svg g.infeasible circle{opacity:.18;fill:#aaa}svg g.dominated circle{opacity:.28}
svg g.front circle{stroke:#000;stroke-width:.8}svg circle:hover{stroke:#000;stroke-width:2;opacity:1}
svg .frontline{fill:none;stroke-width:1.5;opacity:.7}svg .ebar{fill:none;stroke-width:1;opacity:.55}
svg circle[data-tie]{stroke:#e69f00;stroke-width:2.4}td.tie{color:#b35c00;font-weight:600;white-space:normal;max-width:120px}.iv{color:#777;font-size:11px}svg rect.seg:hover{opacity:.75}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{padding:3px 7px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.l,td.l{text-align:left}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
tr:hover td{background:#fff8dc}.legend span{display:inline-block;margin-right:14px}.legend{margin:2px 0}
.facet-buttons{margin:4px 0}.facet-buttons button{font:inherit;font-size:12.5px;margin-right:4px;border:1px solid #bbb;
background:#f6f6f6;border-radius:3px;padding:1px 8px;cursor:pointer}.facet-buttons button.on{background:#222;color:#fff}
td.rec{font-weight:600}svg .rec-label{font-size:11px;font-weight:600;fill:#000}p.recommend{max-width:1150px}
th{white-space:normal;vertical-align:bottom;max-width:120px;overflow-wrap:normal;word-break:keep-all;hyphens:manual}th.l{max-width:none}table.front td.name,table.front td.rec{white-space:normal;min-width:160px;max-width:300px}.sw{display:inline-block;width:11px;height:11px;border-radius:6px;margin-right:4px;vertical-align:-1px}
table.serving .iv{display:block;font-size:10.5px}table.serving th,table.serving td{padding:3px 5px}table.serving td.name,table.serving td.rec{min-width:130px}figure.view{margin:0}figure.view figcaption{font-size:12.5px;margin:2px 0 2px 70px}
p.headline{font-size:17px;line-height:1.45;margin:10px 0 4px;max-width:1250px}p.caveat{margin:2px 0 8px;max-width:1250px;color:#8a4b00;background:#fff7e6;border-left:3px solid #e69f00;padding:3px 8px}
.why{max-width:1250px;font-size:13px;color:#333}h1{font-size:23px}p.meta{margin:2px 0;font-size:12.5px}
.alike{display:block;font-weight:400;color:#666;font-size:11px}.pos{color:#1a7f37}.neg{color:#b42318}.note{color:#666;font-size:12.5px}.scroll{overflow-x:auto}
"""

JS = """
(function(){
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.dataset.dir!=='asc';
  t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir});th.dataset.dir=asc?'asc':'desc';
  rows.sort(function(a,c){var x=a.cells[i].dataset.v,y=c.cells[i].dataset.v;
   if(x===undefined)x=a.cells[i].textContent;if(y===undefined)y=c.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y),r=(isNaN(nx)||isNaN(ny))?String(x).localeCompare(String(y)):nx-ny;
   return asc?r:-r;});
  rows.forEach(function(r){b.appendChild(r)});});});});
document.querySelectorAll('.facet-buttons button').forEach(function(b){b.addEventListener('click',function(){
 var w=b.closest('.facets');w.className=w.className.replace(/\\bby-\\S+/g,'').trim()+' by-'+b.dataset.mode;
 w.querySelectorAll('.facet-buttons button').forEach(function(o){o.classList.toggle('on',o===b)});});});
window.addEventListener('load',function(){var m=document.getElementById('render-ms');
 if(m)m.textContent=String(Math.round(performance.now()));});
})();
"""
