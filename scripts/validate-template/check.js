#!/usr/bin/env node
// check.js validates CloudFormation templates against the CloudFormation
// resource specification as published in @aws-cdk/aws-service-spec (the
// database the AWS CDK generates its L1 constructs from):
//
//   - every resource Type exists, and every property (nested property types
//     included) exists and required ones are present;
//   - every Ref names a parameter, a resource or a pseudo parameter;
//   - every Fn::GetAtt names a resource and an attribute its type has;
//   - every ${...} in Fn::Sub resolves (to a parameter, a resource, a
//     resource attribute, a pseudo parameter or a Sub variable);
//   - Conditions used by resources, outputs and Fn::If exist, DependsOn
//     targets exist, and logical IDs are unique across sections.
//
// Usage: node check.js template.yaml...   Exit status 1 lists every problem.
"use strict";

const fs = require("fs");
const yaml = require("js-yaml");
const { loadAwsServiceSpecSync } = require("@aws-cdk/aws-service-spec");

// YAML short forms of the intrinsic functions.
const intrinsics = ["Ref", "Condition", "Fn::Base64", "Fn::Cidr", "Fn::FindInMap", "Fn::GetAtt", "Fn::GetAZs",
  "Fn::ImportValue", "Fn::Join", "Fn::Select", "Fn::Split", "Fn::Sub", "Fn::Transform", "Fn::And", "Fn::Equals",
  "Fn::If", "Fn::Not", "Fn::Or", "Fn::Length", "Fn::ToJsonString"];
const types = [];
for (const name of intrinsics) {
  const tag = "!" + name.replace(/^Fn::/, "");
  for (const kind of ["scalar", "sequence", "mapping"]) {
    types.push(new yaml.Type(tag, {
      kind,
      construct: (data) => {
        if (name === "Fn::GetAtt" && typeof data === "string") {
          const i = data.indexOf(".");
          data = [data.slice(0, i), data.slice(i + 1)];
        }
        return { [name]: data };
      },
    }));
  }
}
const schema = yaml.DEFAULT_SCHEMA.extend(types);

const pseudo = new Set(["AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition", "AWS::Region",
  "AWS::StackId", "AWS::StackName", "AWS::URLSuffix"]);
const parameterTypes = /^(String|Number|List<Number>|CommaDelimitedList|AWS::[A-Za-z0-9:]+|List<AWS::[A-Za-z0-9:]+>|AWS::SSM::Parameter::Value<.+>)$/;
const topLevel = new Set(["AWSTemplateFormatVersion", "Description", "Metadata", "Parameters", "Rules", "Mappings",
  "Conditions", "Transform", "Resources", "Outputs"]);
const resourceKeys = new Set(["Type", "Properties", "DependsOn", "Condition", "DeletionPolicy", "UpdateReplacePolicy",
  "Metadata", "CreationPolicy", "UpdatePolicy"]);

const db = loadAwsServiceSpecSync();

function resourceSpec(type) {
  const found = db.lookup("resource", "cloudFormationType", "equals", type);
  return found.length === 1 ? found[0] : undefined;
}

function isIntrinsic(v) {
  if (!v || typeof v !== "object" || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  return keys.length === 1 && (keys[0] === "Ref" || keys[0].startsWith("Fn::") || keys[0] === "Condition");
}

function check(file) {
  const problems = [];
  const bad = (where, msg) => problems.push(`${file}: ${where}: ${msg}`);
  let t;
  try {
    t = yaml.load(fs.readFileSync(file, "utf8"), { schema });
  } catch (e) {
    bad("parse", e.message);
    return problems;
  }
  for (const k of Object.keys(t)) if (!topLevel.has(k)) bad(k, "unknown top-level section");
  const params = t.Parameters || {};
  const resources = t.Resources || {};
  const conditions = t.Conditions || {};
  const outputs = t.Outputs || {};
  if (Object.keys(resources).length === 0) bad("Resources", "no resources");

  for (const id of Object.keys(params)) {
    if (resources[id]) bad(`Parameters.${id}`, "logical ID is also a resource");
    if (!parameterTypes.test(params[id].Type || "")) bad(`Parameters.${id}`, `bad Type ${params[id].Type}`);
    if (params[id].AllowedPattern !== undefined) {
      try { new RegExp(params[id].AllowedPattern); } catch (e) { bad(`Parameters.${id}`, `AllowedPattern: ${e.message}`); }
      if (params[id].Default !== undefined && params[id].Default !== "" && !new RegExp(params[id].AllowedPattern).test(String(params[id].Default))) {
        bad(`Parameters.${id}`, `Default ${params[id].Default} does not match AllowedPattern`);
      }
    }
    if (params[id].AllowedValues && params[id].Default !== undefined && !params[id].AllowedValues.map(String).includes(String(params[id].Default))) {
      bad(`Parameters.${id}`, `Default ${params[id].Default} is not among AllowedValues`);
    }
  }
  const specs = {};
  for (const [id, r] of Object.entries(resources)) {
    if (!/^[A-Za-z0-9]+$/.test(id)) bad(`Resources.${id}`, "logical ID must be alphanumeric");
    for (const k of Object.keys(r)) if (!resourceKeys.has(k)) bad(`Resources.${id}`, `unknown attribute ${k}`);
    const spec = resourceSpec(r.Type);
    if (!spec) {
      bad(`Resources.${id}`, `resource type ${r.Type} is not in the CloudFormation specification`);
      continue;
    }
    specs[id] = spec;
    if (r.Condition !== undefined && !conditions[r.Condition]) bad(`Resources.${id}`, `unknown Condition ${r.Condition}`);
    for (const dep of [].concat(r.DependsOn || [])) if (!resources[dep]) bad(`Resources.${id}`, `DependsOn ${dep} is not a resource`);
    checkProperties(`Resources.${id}.Properties`, spec.properties, r.Properties || {}, bad);
  }

  const refOK = (name) => params[name] !== undefined || resources[name] !== undefined || pseudo.has(name);
  const attOK = (res, att) => {
    const spec = specs[res];
    if (!spec) return resources[res] !== undefined; // type already reported
    return Object.prototype.hasOwnProperty.call(spec.attributes || {}, att) || (att === "Ref");
  };
  const walk = (where, v, subVars) => {
    if (Array.isArray(v)) return v.forEach((x, i) => walk(`${where}[${i}]`, x, subVars));
    if (!v || typeof v !== "object") return;
    for (const [k, x] of Object.entries(v)) {
      const here = `${where}.${k}`;
      switch (k) {
        case "Ref":
          if (typeof x !== "string" || !refOK(x)) bad(here, `Ref ${JSON.stringify(x)} resolves to nothing`);
          break;
        case "Fn::GetAtt": {
          if (!Array.isArray(x) || x.length !== 2 || typeof x[0] !== "string") {
            bad(here, "Fn::GetAtt wants [resource, attribute]");
          } else if (!resources[x[0]]) {
            bad(here, `Fn::GetAtt ${x[0]} is not a resource`);
          } else if (typeof x[1] === "string" && !attOK(x[0], x[1])) {
            bad(here, `${resources[x[0]].Type} has no attribute ${x[1]}`);
          }
          walk(here, x, subVars);
          break;
        }
        case "Fn::Sub": {
          let str = x, vars = {};
          if (Array.isArray(x)) {
            [str, vars] = x;
            walk(here, vars, subVars);
          }
          if (typeof str !== "string") {
            bad(here, "Fn::Sub wants a string");
            break;
          }
          for (const m of str.matchAll(/\$\{([^}!][^}]*)\}/g)) {
            const name = m[1].trim();
            if (vars && Object.prototype.hasOwnProperty.call(vars, name)) continue;
            if (refOK(name)) continue;
            const dot = name.indexOf(".");
            if (dot > 0 && resources[name.slice(0, dot)]) {
              if (!attOK(name.slice(0, dot), name.slice(dot + 1))) bad(here, `\${${name}}: ${resources[name.slice(0, dot)].Type} has no attribute ${name.slice(dot + 1)}`);
              continue;
            }
            bad(here, `\${${name}} resolves to nothing`);
          }
          break;
        }
        case "Fn::If":
          if (!Array.isArray(x) || x.length !== 3 || !conditions[x[0]]) bad(here, `Fn::If condition ${JSON.stringify(x && x[0])} is not defined`);
          walk(here, x, subVars);
          break;
        case "Condition":
          if (typeof x === "string" && !conditions[x]) bad(here, `Condition ${x} is not defined`);
          break;
        default:
          walk(here, x, subVars);
      }
    }
  };
  for (const [id, r] of Object.entries(resources)) walk(`Resources.${id}`, r.Properties || {});
  walk("Conditions", conditions);
  for (const [id, o] of Object.entries(outputs)) {
    if (o.Value === undefined) bad(`Outputs.${id}`, "no Value");
    if (o.Condition !== undefined && !conditions[o.Condition]) bad(`Outputs.${id}`, `unknown Condition ${o.Condition}`);
    walk(`Outputs.${id}`, o);
  }
  return problems;
}

// checkProperties checks an object against a property map of the
// specification (a resource's, or a property type's).
function checkProperties(where, propSpecs, value, bad) {
  if (isIntrinsic(value)) return branches(value).forEach((b) => checkProperties(where, propSpecs, b, bad));
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    bad(where, "must be an object");
    return;
  }
  for (const [name, p] of Object.entries(propSpecs)) {
    if (p.required && value[name] === undefined) bad(where, `required property ${name} is missing`);
  }
  for (const [name, v] of Object.entries(value)) {
    const p = propSpecs[name];
    if (!p) {
      bad(`${where}.${name}`, "property is not in the CloudFormation specification");
      continue;
    }
    checkValue(`${where}.${name}`, p.type, v, bad);
  }
}

// branches returns the values an intrinsic may take that can still be
// checked: both arms of Fn::If; nothing for the others (their result is
// only known at deploy time).
function branches(v) {
  if (v["Fn::If"] && Array.isArray(v["Fn::If"])) {
    return v["Fn::If"].slice(1).filter((b) => !(isIntrinsic(b) && b.Ref === "AWS::NoValue"));
  }
  return [];
}

function checkValue(where, type, v, bad) {
  if (isIntrinsic(v)) {
    branches(v).forEach((b) => checkValue(where, type, b, bad));
    return;
  }
  switch (type.type) {
    case "ref": {
      const def = db.get("typeDefinition", type.reference.$ref);
      checkProperties(where, def.properties, v, bad);
      break;
    }
    case "array":
      if (!Array.isArray(v)) {
        bad(where, "must be a list");
        break;
      }
      v.forEach((x, i) => checkValue(`${where}[${i}]`, type.element, x, bad));
      break;
    case "map":
      if (!v || typeof v !== "object" || Array.isArray(v)) {
        bad(where, "must be a map");
        break;
      }
      for (const [k, x] of Object.entries(v)) checkValue(`${where}.${k}`, type.element, x, bad);
      break;
    case "string":
      if (typeof v === "object") bad(where, "must be a string");
      else if (type.allowedValues && !type.allowedValues.includes(String(v))) bad(where, `${v} is not one of ${type.allowedValues.join(", ")}`);
      break;
    case "integer":
    case "number":
      if (typeof v === "object" || Number.isNaN(Number(v))) bad(where, "must be a number");
      break;
    case "boolean":
      if (typeof v === "object" || !["true", "false"].includes(String(v))) bad(where, "must be a boolean");
      break;
    case "union":
      // Accept when any member type accepts the value.
      if (!type.types.some((t) => { const p = []; checkValue(where, t, v, (w, m) => p.push(m)); return p.length === 0; })) {
        bad(where, `matches none of the allowed shapes (${type.types.map((t) => t.type).join(", ")})`);
      }
      break;
    default:
      // json, tag, date-time and the like: any value.
      break;
  }
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: check.js template.yaml...");
  process.exit(2);
}
let all = [];
for (const f of files) all = all.concat(check(f));
if (all.length) {
  for (const p of all) console.error(p);
  console.error(`${all.length} problem(s)`);
  process.exit(1);
}
console.log(`ok: ${files.join(", ")} (CloudFormation specification from @aws-cdk/aws-service-spec)`);
