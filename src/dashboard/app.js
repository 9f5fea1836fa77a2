'use strict';
/* placeholder until the page lands: shows how many flags status.json has */
fetch('status.json').then(function (r) { return r.json(); }).then(function (j) {
  var n = 0;
  j.projects.forEach(function (p) { n += p.flags.length; });
  document.getElementById('status').textContent = n + ' flags';
});
